package orderkafka

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/order/orderid"
	"github.com/seckillkit/seckill/order/reconcile"
)

// The helpers of the order package's own tests that the Kafka tests need,
// over its exported API.

// ledger is an in-memory Redis reservation ledger and Releaser.
type ledger struct {
	mu       sync.Mutex
	resv     map[string]reconcile.Reservation
	act      map[string]string
	released map[string]int
}

func newLedger() *ledger {
	return &ledger{resv: map[string]reconcile.Reservation{}, act: map[string]string{}, released: map[string]int{}}
}

func (l *ledger) reserve(activity string, r reconcile.Reservation) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.resv[r.ID] = r
	l.act[r.ID] = activity
}

func (l *ledger) Release(_ context.Context, activity string, id string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.resv[id]; ok && l.act[id] == activity {
		delete(l.resv, id)
		l.released[id]++
	}
	return nil
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

// memFallback is an outbox stand-in: rows stored in memory, relayed later.
type memFallback struct {
	mu   sync.Mutex
	rows []order.Message
}

func (f *memFallback) Store(_ context.Context, m order.Message) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rows = append(f.rows, m)
	return nil
}

// eachDB runs f as a parallel subtest on a fresh database of every kind
// available, with the order tables under their default names.
func eachDB(t *testing.T, f func(t *testing.T, db *gorm.DB)) {
	t.Helper()
	for kind, db := range testenv.AllDB(t) {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			require.NoError(t, order.AutoMigrate(context.Background(), db))
			f(t, db)
		})
	}
}

func addActivity(t testing.TB, db *gorm.DB, id string, stock, limit int64) {
	t.Helper()
	now := testenv.EpochDay(0)
	require.NoError(t, db.Create(&order.Activity{ID: id, Name: "a" + id, ActivityPrice: 990, OriginalPrice: 1990,
		ProductID: 9000, ProductName: "product " + id,
		Stock: stock, Remaining: stock, PerUserLimit: limit, Status: 1, Start: now, End: now.Add(24 * time.Hour)}).Error)
}

func countOrders(t testing.TB, db *gorm.DB, where string, args ...any) int64 {
	t.Helper()
	var n int64
	q := db.Model(&order.Order{})
	if where != "" {
		q = q.Where(where, args...)
	}
	require.NoError(t, q.Count(&n).Error)
	return n
}

// checkConservation asserts DB stock + live orders = initial.
func checkConservation(t testing.TB, db *gorm.DB, act string, initial int64) {
	t.Helper()
	var live int64
	require.NoError(t, db.Model(&order.Order{}).Where("activity_id = ? AND status <> ?", act, order.OrderCancelled).
		Select("COALESCE(SUM(qty),0)").Scan(&live).Error)
	var a order.Activity
	require.NoError(t, db.Where("id = ?", act).First(&a).Error)
	require.Equal(t, initial, a.Remaining+live, "DB stock + live orders = initial")
}

// newGen returns an ID generator for machine on the real clock.
func newGen(t testing.TB, machine int64) *orderid.Generator {
	t.Helper()
	g, err := orderid.New(machine)
	require.NoError(t, err)
	return g
}

func newProc(t testing.TB, db *gorm.DB, opts ...order.ProcessorOption) *order.Processor {
	t.Helper()
	p, err := order.NewProcessor(db, newGen(t, 1), opts...)
	require.NoError(t, err)
	return p
}

func newHandler(t testing.TB, c *order.Consumer, opts ...HandlerOption) *Handler {
	t.Helper()
	h, err := NewHandler(c, opts...)
	require.NoError(t, err)
	return h
}

// msg is message i of user in activity act, at the current version.
func msg(i int, act, user string) order.Message {
	return order.Message{Version: order.MessageVersion, MsgID: fmt.Sprintf("m-%d", i), ReservationID: fmt.Sprintf("r-%d", i),
		ActivityID: act, UserID: user, Qty: 1, CreatedAt: testenv.Epoch()}
}

// uuidUser returns a UUID-shaped user ID for i.
func uuidUser(i int) string {
	return fmt.Sprintf("%08x-4b1d-4c0e-9a7f-%012x", uint32(i)*2654435761, i)
}

// num returns the decimal string of n: a numeric ID.
func num[T ~int | ~int64](n T) string { return strconv.FormatInt(int64(n), 10) }

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

// fakeSession and fakeClaim drive ConsumeClaim without Kafka.
type fakeSession struct {
	ctx    context.Context
	mu     sync.Mutex
	marked []int64
}

func (s *fakeSession) Claims() map[string][]int32               { return nil }
func (s *fakeSession) MemberID() string                         { return "fake" }
func (s *fakeSession) GenerationID() int32                      { return 1 }
func (s *fakeSession) MarkOffset(string, int32, int64, string)  {}
func (s *fakeSession) Commit()                                  {}
func (s *fakeSession) ResetOffset(string, int32, int64, string) {}
func (s *fakeSession) Context() context.Context                 { return s.ctx }
func (s *fakeSession) MarkMessage(m *sarama.ConsumerMessage, _ string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.marked = append(s.marked, m.Offset)
}

func (s *fakeSession) marks() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int64(nil), s.marked...)
}

type fakeClaim struct{ ch chan *sarama.ConsumerMessage }

func (c *fakeClaim) Topic() string                            { return "orders" }
func (c *fakeClaim) Partition() int32                         { return 0 }
func (c *fakeClaim) InitialOffset() int64                     { return 0 }
func (c *fakeClaim) HighWaterMarkOffset() int64               { return 0 }
func (c *fakeClaim) Messages() <-chan *sarama.ConsumerMessage { return c.ch }

func kmsg(t testing.TB, off int64, m order.Message) *sarama.ConsumerMessage {
	t.Helper()
	b, err := m.Encode()
	require.NoError(t, err)
	return &sarama.ConsumerMessage{Topic: "orders", Offset: off, Key: []byte(m.Key()), Value: b}
}

// deadLetterFunc adapts a function to order.DeadLetter.
type deadLetterFunc func(ctx context.Context, rec order.Record, cause error) error

func (f deadLetterFunc) DeadLetter(ctx context.Context, rec order.Record, cause error) error {
	return f(ctx, rec, cause)
}
