package status

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/order/internal/ordertest"
)

// redisStock is the shared Redis ledger that counts its releases.
type redisStock = ordertest.RedisStock

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
	f.rs = ordertest.NewRedisStock(t, "1", initial)
	proc, err := order.NewProcessor(db, newGen(t, 1), order.WithClock(f.clock))
	require.NoError(t, err)
	prefix := testenv.Prefix(t)
	f.c, err = NewCanceller(db, nil, f.rs, append([]CancellerOption{WithClock(f.clock), WithKeyPrefix(prefix)}, opts...)...)
	require.NoError(t, err)
	f.cLate, err = NewCanceller(db, nil, f.rs, append([]CancellerOption{WithClock(f.late), WithKeyPrefix(prefix)}, opts...)...)
	require.NoError(t, err)
	for i := 0; i < n; i++ {
		m := msg(i, "1", num(100+i))
		f.rs.Reserve(t, m.ReservationID, m.Qty)
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
	stock, held, released := f.rs.Counts(t)
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
