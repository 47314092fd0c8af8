package order_test

import (
	"context"
	"errors"
	"maps"
	"strconv"
	"sync"
	"testing"

	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/order/internal/ordertest"
	"github.com/seckillkit/seckill/order/reconcile"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

// Reservation is a ledger entry.
type Reservation = reconcile.Reservation

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

func addActivity(t testing.TB, db *gorm.DB, id string, stock, limit int64) {
	t.Helper()
	addActivityIn(t, db, defaultTables(), id, stock, limit)
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
func runClaim(t testing.TB, c *order.Consumer, sess *fakeSession, recs []order.Record) error {
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

// num returns the decimal string of n: a numeric ID.
func num[T ~int | ~int64](n T) string { return strconv.FormatInt(int64(n), 10) }

// memFallback is an outbox stand-in: rows stored in memory, relayed later.
type memFallback struct {
	mu   sync.Mutex
	rows []order.Message
	fail error
}

func (f *memFallback) Store(_ context.Context, m order.Message) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return f.fail
	}
	f.rows = append(f.rows, m)
	return nil
}

func newProc(t testing.TB, db *gorm.DB, opts ...order.ProcessorOption) *order.Processor {
	t.Helper()
	p, err := order.NewProcessor(db, newGen(t, 1), opts...)
	require.NoError(t, err)
	return p
}

// defaultTables is the default table names.
func defaultTables() order.Tables {
	t, err := order.TablesOf()
	if err != nil {
		panic(err)
	}
	return t
}

// otherTables are table names other than the defaults.
var otherTables = order.Tables{Activity: "shop_activity", Order: "order", Dedup: "shop_dedup", Adjust: "shop_adjust", Payment: "shop_payment", Line: "shop_line"}

func newReconcilerMust(t *testing.T, db *gorm.DB, led *ledger, clock order.Clock) *reconcile.Reconciler {
	t.Helper()
	rec, err := reconcile.NewReconciler(db, led.Reservations, led, reconcile.WithClock(clock))
	require.NoError(t, err)
	return rec
}

// deadLetterFunc adapts a function to order.DeadLetter.
type deadLetterFunc func(ctx context.Context, rec order.Record, cause error) error

func (f deadLetterFunc) DeadLetter(ctx context.Context, rec order.Record, cause error) error {
	return f(ctx, rec, cause)
}

// notifierFunc adapts a function to order.Notifier.
type notifierFunc func(ctx context.Context, r order.Result)

func (f notifierFunc) Notify(ctx context.Context, r order.Result) { f(ctx, r) }

// isPermanent reports whether err is or wraps an order.PermanentError.
func isPermanent(err error) bool {
	var pe *order.PermanentError
	return errors.As(err, &pe)
}

// mustSchema is order.Schema of dialect for the default tables.
func mustSchema(t testing.TB, dialect string) string {
	t.Helper()
	ddl, err := order.Schema(dialect)
	require.NoError(t, err)
	return ddl
}

// The fixtures every order package's tests share (order/internal/ordertest).
var (
	dbKinds           = ordertest.DBKinds
	openDB            = ordertest.OpenDB
	addActivityIn     = ordertest.AddActivityIn
	countOrders       = ordertest.CountOrders
	liveOrders        = ordertest.LiveOrders
	dbStock           = ordertest.DBStock
	checkConservation = ordertest.CheckConservation
	newGen            = ordertest.NewGen
	newGenOn          = ordertest.NewGenOn
	msg               = ordertest.Msg
	kmsg              = ordertest.KMsg
	eventually        = ordertest.Eventually
	uuidUser          = ordertest.UUIDUser
	productOf         = ordertest.ProductOf
	testIDEpoch       = ordertest.IDEpoch
	newClock          = ordertest.NewClock
	eachDB            = ordertest.EachDB
)
