// Package ordertest holds the test fixtures the order packages share (a
// Redis reservation ledger that counts its releases, every database kind
// migrated). It is imported only by tests under order/, and never by
// package order's own internal tests (order imports nothing of it).
package ordertest

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/order/orderid"
)

// EachDB runs f on a fresh database of every kind available (SQLite
// always; MariaDB and PostgreSQL with SECKILL_MYSQL_DSN and
// SECKILL_POSTGRES_DSN), migrated, each in a parallel subtest.
func EachDB(t *testing.T, f func(t *testing.T, db *gorm.DB)) {
	t.Helper()
	for kind, db := range testenv.AllDB(t) {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			require.NoError(t, order.AutoMigrate(context.Background(), db))
			f(t, db)
		})
	}
}

// RedisStock is a reservation ledger in Redis, the shape of stock's: a
// stock counter and a hash of reservations (ID → qty) under one hash tag,
// and a hash counting the releases that took effect, per reservation.
// Release removes the entry and returns its units in one script, so a
// repeated release changes nothing: tests count stock and releases from
// Redis. It is an order.Releaser.
type RedisStock struct {
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

// NewRedisStock is activity act's ledger on the test's Redis
// (testenv.Redis, its own prefix), holding initial units.
func NewRedisStock(t testing.TB, act string, initial int64) *RedisStock {
	t.Helper()
	rdb := testenv.Redis(t)
	p := testenv.Prefix(t) + "{" + act + "}:"
	s := &RedisStock{rdb: rdb, stock: p + "stock", resv: p + "resv", released: p + "released"}
	require.NoError(t, rdb.Set(context.Background(), s.stock, initial, 0).Err())
	return s
}

// Reserve takes qty units for reservation id.
func (s *RedisStock) Reserve(t testing.TB, id string, qty int64) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, s.rdb.DecrBy(ctx, s.stock, qty).Err())
	require.NoError(t, s.rdb.HSet(ctx, s.resv, id, qty).Err())
}

// SetFail makes every Release fail with err until it is set to nil.
func (s *RedisStock) SetFail(err error) {
	s.mu.Lock()
	s.fail = err
	s.mu.Unlock()
}

// Release gives reservation id's units back, once.
func (s *RedisStock) Release(ctx context.Context, _ string, id string) error {
	s.mu.Lock()
	fail := s.fail
	s.mu.Unlock()
	if fail != nil {
		return fail
	}
	return releaseScript.Run(ctx, s.rdb, []string{s.stock, s.resv, s.released}, id).Err()
}

// Counts reads Redis: the stock, the units held by reservations, and the
// releases that took effect per reservation.
func (s *RedisStock) Counts(t testing.TB) (stock, held int64, released map[string]int64) {
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

// DBKinds lists the kinds of database available, as testenv.AllDB would
// return them, in a fixed order (for benchmarks).
func DBKinds() []testenv.DBKind {
	kinds := []testenv.DBKind{testenv.KindSQLite}
	if os.Getenv(testenv.EnvMySQLDSN) != "" {
		kinds = append(kinds, testenv.KindMySQL)
	}
	if os.Getenv(testenv.EnvPostgresDSN) != "" {
		kinds = append(kinds, testenv.KindPostgres)
	}
	return kinds
}

// OpenDB returns a fresh database of the given kind, without tables.
func OpenDB(t testing.TB, kind testenv.DBKind) *gorm.DB {
	t.Helper()
	switch kind {
	case testenv.KindMySQL:
		return testenv.MySQL(t)
	case testenv.KindPostgres:
		return testenv.Postgres(t)
	}
	return testenv.SQLite(t)
}

// AddActivityIn adds an activity row to the activity table of tabs.
func AddActivityIn(t testing.TB, db *gorm.DB, tabs order.Tables, id string, stock, limit int64) {
	t.Helper()
	now := testenv.EpochDay(0) // the activity runs all day long on the test clock's day
	require.NoError(t, db.Table(tabs.Activity).Create(&order.Activity{ID: id, Name: "a" + id, ActivityPrice: 990, OriginalPrice: 1990,
		ProductID: ProductOf(id), ProductName: "product " + id,
		Stock: stock, Remaining: stock, PerUserLimit: limit, Status: 1, Start: now, End: now.Add(24 * time.Hour)}).Error)
}

// CountOrders counts the orders matching where (all without one).
func CountOrders(t testing.TB, db *gorm.DB, where string, args ...any) int64 {
	t.Helper()
	var n int64
	q := db.Model(&order.Order{})
	if where != "" {
		q = q.Where(where, args...)
	}
	require.NoError(t, q.Count(&n).Error)
	return n
}

// LiveOrders is the units of act's orders that hold theirs: not
// cancelled, not refunded to the sale.
func LiveOrders(t testing.TB, db *gorm.DB, act string) int64 {
	t.Helper()
	var n int64
	require.NoError(t, db.Model(&order.Order{}).Where("activity_id = ? AND status <> ? AND NOT (status = ? AND restock = ?)", act, order.OrderCancelled, order.OrderRefunded, "sale").
		Select("COALESCE(SUM(qty),0)").Scan(&n).Error)
	return n
}

// DBStock is act's remaining stock in the database.
func DBStock(t testing.TB, db *gorm.DB, act string) int64 {
	t.Helper()
	var a order.Activity
	require.NoError(t, db.Where("id = ?", act).First(&a).Error)
	return a.Remaining
}

// CheckConservation asserts DB stock + live orders = initial.
func CheckConservation(t testing.TB, db *gorm.DB, act string, initial int64) {
	t.Helper()
	require.Equal(t, initial, DBStock(t, db, act)+LiveOrders(t, db, act), "DB stock + live orders = initial")
}

// NewGen returns an ID generator for machine on the real clock with the
// default ID epoch.
func NewGen(t testing.TB, machine int64) *orderid.Generator {
	t.Helper()
	g, err := orderid.New(machine)
	require.NoError(t, err)
	return g
}

// NewGenOn returns an ID generator for machine on the test clock, with the
// ID epoch IDEpoch (which moves with SECKILL_TEST_EPOCH: on the real
// clock it would lie decades after the real now under "future").
func NewGenOn(t testing.TB, machine int64, clock *testenv.Clock) *orderid.Generator {
	t.Helper()
	g, err := orderid.New(machine, orderid.WithClock(clock), orderid.WithEpoch(IDEpoch()))
	require.NoError(t, err)
	return g
}

// Msg is message i of user in activity act, at the current version.
func Msg(i int, act, user string) order.Message {
	return order.Message{Version: order.MessageVersion, MsgID: fmt.Sprintf("m-%d", i), ReservationID: fmt.Sprintf("r-%d", i),
		ActivityID: act, UserID: user, Qty: 1, CreatedAt: testenv.Epoch()}
}

// KMsg is m as a consumed record at offset off.
func KMsg(t testing.TB, off int64, m order.Message) order.Record {
	t.Helper()
	b, err := m.Encode()
	require.NoError(t, err)
	return order.Record{Topic: "orders", Offset: off, Key: []byte(m.Key()), Value: b}
}

// Eventually polls cond (Kafka delivery has no clock to move).
func Eventually(t testing.TB, d time.Duration, cond func() bool, format string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timeout: "+format, args...)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// UUIDUser returns a UUID-shaped user ID for i: the string IDs of a shop
// (the numeric ones of the tests are plain decimal strings).
func UUIDUser(i int) string {
	return fmt.Sprintf("%08x-4b1d-4c0e-9a7f-%012x", uint32(i)*2654435761, i)
}

// ProductOf is the product ID tests give the activity id: 9000 + id for a
// numeric id, else 9000.
func ProductOf(id string) int64 {
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil {
		return 9000
	}
	return 9000 + n
}

// IDEpoch is the ID epoch of every generator that runs on a test clock
// (NewGenOn): a day before the test epoch.
// The default ID epoch, 2024-01-01, is after the "past" test epoch (a
// generator refuses a clock before its epoch) and more than 41 bits of
// milliseconds before a late enough one (IDs overflow). Generators on the
// real clock keep the default.
func IDEpoch() time.Time { return testenv.Epoch().Add(-24 * time.Hour) }

// NewClock returns a fake clock standing at the test epoch. It meets no real
// time: the package compares its readings only with each other (expiry,
// grace, queue scores), never with a deadline, a TTL or a server's NOW().
func NewClock() *testenv.Clock { return testenv.NewEpochClock(0) }
