package status

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/seckillkit/seckill/order"
)

// redisStock is a reservation ledger in Redis, the shape of stock's: a
// stock counter and a hash of reservations (ID → qty) under one hash tag,
// and a hash counting the releases that took effect, per reservation.
// Release removes the entry and returns its units in one script, so a
// repeated release changes nothing: the tests count stock and releases
// from Redis.
type redisStock struct {
	rdb                   redis.UniversalClient
	stock, resv, released string

	mu   sync.Mutex
	fail error
}

var releaseScript = redis.NewScript(`
local q = redis.call('HGET', KEYS[2], ARGV[1])
if not q then return 0 end
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('INCRBY', KEYS[1], q)
redis.call('HINCRBY', KEYS[3], ARGV[1], 1)
return 1`)

func newRedisStock(t testing.TB, act string, initial int64) *redisStock {
	t.Helper()
	rdb := testenv.Redis(t)
	p := testenv.Prefix(t) + "{" + act + "}:"
	s := &redisStock{rdb: rdb, stock: p + "stock", resv: p + "resv", released: p + "released"}
	require.NoError(t, rdb.Set(context.Background(), s.stock, initial, 0).Err())
	return s
}

func (s *redisStock) reserve(t testing.TB, id string, qty int64) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, s.rdb.DecrBy(ctx, s.stock, qty).Err())
	require.NoError(t, s.rdb.HSet(ctx, s.resv, id, qty).Err())
}

func (s *redisStock) setFail(err error) {
	s.mu.Lock()
	s.fail = err
	s.mu.Unlock()
}

func (s *redisStock) Release(ctx context.Context, _ string, id string) error {
	s.mu.Lock()
	fail := s.fail
	s.mu.Unlock()
	if fail != nil {
		return fail
	}
	return releaseScript.Run(ctx, s.rdb, []string{s.stock, s.resv, s.released}, id).Err()
}

// counts reads Redis: the stock, the units held by reservations, and the
// releases that took effect per reservation.
func (s *redisStock) counts(t testing.TB) (stock, held int64, released map[string]int64) {
	t.Helper()
	ctx := context.Background()
	stock, err := s.rdb.Get(ctx, s.stock).Int64()
	require.NoError(t, err)
	resv, err := s.rdb.HGetAll(ctx, s.resv).Result()
	require.NoError(t, err)
	for _, v := range resv {
		n, err := strconv.ParseInt(v, 10, 64)
		require.NoError(t, err)
		held += n
	}
	rel, err := s.rdb.HGetAll(ctx, s.released).Result()
	require.NoError(t, err)
	released = map[string]int64{}
	for k, v := range rel {
		n, err := strconv.ParseInt(v, 10, 64)
		require.NoError(t, err)
		released[k] = n
	}
	return stock, held, released
}

type payFixture struct {
	db    *gorm.DB
	rs    *redisStock
	clock *fixedClock
	late  *fixedClock // a clock past every order's expiry
	c     *Canceller  // on clock
	cLate *Canceller  // on late: its Pay and scans see every order expired
	nos   []string
	resv  map[string]string // order no → reservation
	init  int64
}

// newPayFixture writes n one-unit orders (users 100..) on activity 1 with
// stock initial, reserved in Redis first; two cancellers share them, one
// before the payment window closes and one after.
func newPayFixture(t *testing.T, db *gorm.DB, initial int64, n int, opts ...CancellerOption) *payFixture {
	t.Helper()
	f := &payFixture{db: db, clock: newClock(), init: initial, resv: map[string]string{}}
	f.late = testenv.NewEpochClock(0)
	f.late.Add(31 * time.Minute)
	addActivity(t, db, "1", initial, 1)
	f.rs = newRedisStock(t, "1", initial)
	proc, err := order.NewProcessor(db, newGen(t, 1), order.WithClock(f.clock))
	require.NoError(t, err)
	prefix := testenv.Prefix(t)
	f.c, err = NewCanceller(db, nil, f.rs, append([]CancellerOption{WithClock(f.clock), WithKeyPrefix(prefix)}, opts...)...)
	require.NoError(t, err)
	f.cLate, err = NewCanceller(db, nil, f.rs, append([]CancellerOption{WithClock(f.late), WithKeyPrefix(prefix)}, opts...)...)
	require.NoError(t, err)
	for i := 0; i < n; i++ {
		m := msg(i, "1", num(100+i))
		f.rs.reserve(t, m.ReservationID, m.Qty)
		out, err := proc.Handle(context.Background(), m)
		require.NoError(t, err)
		require.Equal(t, order.StatusSuccess, out.Status)
		f.nos = append(f.nos, out.OrderNo)
		f.resv[out.OrderNo] = m.ReservationID
	}
	return f
}

func (f *payFixture) order(t *testing.T, no string) order.Order {
	t.Helper()
	var o order.Order
	require.NoError(t, f.db.Where("order_no = ?", no).First(&o).Error)
	return o
}

// holding is the units of the orders that hold theirs, counted in SQL:
// CREATED, PAID, and REFUNDED unless restocked to the sale.
func holding(t testing.TB, db *gorm.DB) int64 {
	t.Helper()
	var n int64
	require.NoError(t, db.Raw("SELECT COALESCE(SUM(qty),0) FROM seckill_order WHERE status IN (?, ?) OR status = ? AND restock <> ?",
		order.OrderCreated, order.OrderPaid, order.OrderRefunded, "sale").Scan(&n).Error)
	return n
}

// check asserts the conservation of both stores and that every order
// that gave its units back did so exactly once, in Redis and in SQL:
// Redis stock + held reservations = initial; DB stock + holding orders =
// initial; the released reservations are exactly those of the cancelled
// orders and the orders refunded to the sale, each released once.
func (f *payFixture) check(t *testing.T) {
	t.Helper()
	stock, held, released := f.rs.counts(t)
	require.Equal(t, f.init, stock+held, "Redis: stock + held = initial")
	require.Equal(t, f.init, dbStock(t, f.db, "1")+holding(t, f.db), "DB: stock + holding orders = initial")
	require.Equal(t, held, holding(t, f.db), "Redis holds what the DB's orders hold")
	for _, no := range f.nos {
		o := f.order(t, no)
		gaveBack := o.Status == order.OrderCancelled || o.Status == order.OrderRefunded && o.Restock == string(RestockSale)
		want := int64(0)
		if gaveBack {
			want = 1
		}
		require.Equal(t, want, released[f.resv[no]], "releases of %s (%s %s)", no, o.Status, o.Restock)
	}
}

// paymentRows counts the payment rows of an order by outcome.
func paymentRows(t testing.TB, db *gorm.DB, no string) map[string]int64 {
	t.Helper()
	var rows []paymentRow
	require.NoError(t, db.Table("seckill_payment").Where("order_no = ?", no).Find(&rows).Error)
	out := map[string]int64{}
	for _, r := range rows {
		out[r.Outcome]++
	}
	return out
}
