package order

import (
	"context"
	"fmt"
	"maps"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/seckillkit/seckill/order/orderid"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

// Reservation is a ledger entry (reconcile.Reservation's shape).
type Reservation struct {
	ID, User string
	Qty      int64
	At       time.Time
}

// ledger is an in-memory Redis reservation ledger and Releaser.
type ledger struct {
	mu       sync.Mutex
	resv     map[string]Reservation
	act      map[string]string
	released map[string]int // actual removals per reservation
	calls    int
	fail     error
}

func newLedger() *ledger {
	return &ledger{resv: map[string]Reservation{}, act: map[string]string{}, released: map[string]int{}}
}

func (l *ledger) reserve(activity string, r Reservation) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.resv[r.ID] = r
	l.act[r.ID] = activity
}

func (l *ledger) Release(_ context.Context, activity string, id string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls++
	if l.fail != nil {
		return l.fail
	}
	if _, ok := l.resv[id]; ok && l.act[id] == activity {
		delete(l.resv, id)
		l.released[id]++
	}
	return nil
}

func (l *ledger) Reservations(_ context.Context, activity string, cursor uint64, count int64) ([]Reservation, uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Reservation
	for id, r := range l.resv {
		if l.act[id] == activity {
			out = append(out, r)
		}
	}
	return out, 0, nil
}

func (l *ledger) releases() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, v := range l.released {
		n += v
	}
	return n
}

func (l *ledger) releasedByID() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.released)
}

func (l *ledger) setFail(err error) {
	l.mu.Lock()
	l.fail = err
	l.mu.Unlock()
}

type fixedClock = testenv.Clock

// newClock returns a fake clock standing at the test epoch. It meets no real
// time: the package compares its readings only with each other (expiry,
// grace, queue scores), never with a deadline, a TTL or a server's NOW().
func newClock() *fixedClock { return testenv.NewEpochClock(0) }

// testIDEpoch is the ID epoch of every generator that runs on a test clock
// (newGenOn): a day before the test epoch.
// The default ID epoch, 2024-01-01, is after the "past" test epoch (a
// generator refuses a clock before its epoch) and more than 41 bits of
// milliseconds before a late enough one (IDs overflow). Generators on the
// real clock keep the default.
func testIDEpoch() time.Time { return testenv.Epoch().Add(-24 * time.Hour) }

// eachDB runs f as a parallel subtest, named after the kind, on a fresh
// database of every kind available (testenv.AllDB: SQLite always, MariaDB
// and PostgreSQL when SECKILL_MYSQL_DSN and SECKILL_POSTGRES_DSN are set),
// with the order tables under their default names.
func eachDB(t *testing.T, f func(t *testing.T, db *gorm.DB)) {
	t.Helper()
	for kind, db := range testenv.AllDB(t) {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			require.NoError(t, AutoMigrate(context.Background(), db))
			f(t, db)
		})
	}
}

// dbKinds lists the kinds of database available, as testenv.AllDB would
// return them, in a fixed order (for benchmarks).
func dbKinds() []testenv.DBKind {
	kinds := []testenv.DBKind{testenv.KindSQLite}
	if os.Getenv(testenv.EnvMySQLDSN) != "" {
		kinds = append(kinds, testenv.KindMySQL)
	}
	if os.Getenv(testenv.EnvPostgresDSN) != "" {
		kinds = append(kinds, testenv.KindPostgres)
	}
	return kinds
}

// openDB returns a fresh database of the given kind, without tables.
func openDB(t testing.TB, kind testenv.DBKind) *gorm.DB {
	t.Helper()
	switch kind {
	case testenv.KindMySQL:
		return testenv.MySQL(t)
	case testenv.KindPostgres:
		return testenv.Postgres(t)
	}
	return testenv.SQLite(t)
}

func addActivity(t testing.TB, db *gorm.DB, id string, stock, limit int64) {
	t.Helper()
	addActivityIn(t, db, defaultTables(), id, stock, limit)
}

// addActivityIn adds an activity row to the activity table of tabs.
func addActivityIn(t testing.TB, db *gorm.DB, tabs Tables, id string, stock, limit int64) {
	t.Helper()
	now := testenv.EpochDay(0) // the activity runs all day long on the test clock's day
	require.NoError(t, db.Table(tabs.Activity).Create(&Activity{ID: id, Name: "a" + id, ActivityPrice: 990, OriginalPrice: 1990,
		ProductID: productOf(id), ProductName: "product " + id,
		Stock: stock, Remaining: stock, PerUserLimit: limit, Status: 1, Start: now, End: now.Add(24 * time.Hour)}).Error)
}

func countOrders(t testing.TB, db *gorm.DB, where string, args ...any) int64 {
	t.Helper()
	var n int64
	q := db.Model(&Order{})
	if where != "" {
		q = q.Where(where, args...)
	}
	require.NoError(t, q.Count(&n).Error)
	return n
}

func liveOrders(t testing.TB, db *gorm.DB, act string) int64 {
	t.Helper()
	var n int64
	require.NoError(t, db.Model(&Order{}).Where("activity_id = ? AND status <> ?", act, OrderCancelled).
		Select("COALESCE(SUM(qty),0)").Scan(&n).Error)
	return n
}

func dbStock(t testing.TB, db *gorm.DB, act string) int64 {
	t.Helper()
	var a Activity
	require.NoError(t, db.Where("id = ?", act).First(&a).Error)
	return a.Remaining
}

// checkConservation asserts DB stock + live orders = initial.
func checkConservation(t testing.TB, db *gorm.DB, act string, initial int64) {
	t.Helper()
	require.Equal(t, initial, dbStock(t, db, act)+liveOrders(t, db, act), "DB stock + live orders = initial")
}

// newGen returns an ID generator for machine on the real clock with the
// default ID epoch.
func newGen(t testing.TB, machine int64) *orderid.Generator {
	t.Helper()
	g, err := orderid.New(machine)
	require.NoError(t, err)
	return g
}

// newGenOn returns an ID generator for machine on the test clock, with the
// ID epoch testIDEpoch (which moves with SECKILL_TEST_EPOCH: on the real
// clock it would lie decades after the real now under "future").
func newGenOn(t testing.TB, machine int64, clock *fixedClock) *orderid.Generator {
	t.Helper()
	g, err := orderid.New(machine, orderid.WithClock(clock), orderid.WithEpoch(testIDEpoch()))
	require.NoError(t, err)
	return g
}

// msg is message i of user in activity act, at the current version.
func msg(i int, act, user string) Message {
	return Message{Version: 3, MsgID: fmt.Sprintf("m-%d", i), ReservationID: fmt.Sprintf("r-%d", i),
		ActivityID: act, UserID: user, Qty: 1, CreatedAt: testenv.Epoch()}
}

// fakeSession drives Consume the way orderkafka's handler does, without
// Kafka: it marks the offset of the last record done.
type fakeSession struct {
	ctx    context.Context
	mu     sync.Mutex
	marked []int64
}

func (s *fakeSession) mark(off int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.marked = append(s.marked, off)
}

func (s *fakeSession) lastMarked() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.marked) == 0 {
		return -1
	}
	return s.marked[len(s.marked)-1]
}

// runClaim hands recs to c.Consume as one claim whose records are all
// buffered (the handler collects them in batches of WithBatchSize), marks
// the last record done, and returns nil when the session ended.
func runClaim(t testing.TB, c *Consumer, sess *fakeSession, recs []Record) error {
	t.Helper()
	done, err := c.Consume(sess.ctx, recs)
	if done > 0 {
		sess.mark(recs[done-1].Offset)
	}
	if err != nil && sess.ctx.Err() != nil {
		return nil
	}
	return err
}

func kmsg(t testing.TB, off int64, m Message) Record {
	t.Helper()
	b, err := m.Encode()
	require.NoError(t, err)
	return Record{Topic: "orders", Offset: off, Key: []byte(m.Key()), Value: b}
}

// eventually polls cond (Kafka delivery has no clock to move).
func eventually(t testing.TB, d time.Duration, cond func() bool, format string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timeout: "+format, args...)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// uuidUser returns a UUID-shaped user ID for i: the string IDs of a shop
// (the numeric ones of the tests are plain decimal strings).
func uuidUser(i int) string {
	return fmt.Sprintf("%08x-4b1d-4c0e-9a7f-%012x", uint32(i)*2654435761, i)
}

// num returns the decimal string of n: a numeric ID.
func num[T ~int | ~int64](n T) string { return strconv.FormatInt(int64(n), 10) }

// productOf is the product ID tests give the activity id: 9000 + id for a
// numeric id, else 9000.
func productOf(id string) int64 {
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil {
		return 9000
	}
	return 9000 + n
}

// memFallback is an outbox stand-in: rows stored in memory, relayed later.
type memFallback struct {
	mu   sync.Mutex
	rows []Message
	fail error
}

func (f *memFallback) Store(_ context.Context, m Message) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return f.fail
	}
	f.rows = append(f.rows, m)
	return nil
}
