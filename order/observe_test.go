package order_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckillkit/seckill/internal/observe"
	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/order/handoff"
	"github.com/seckillkit/seckill/order/operate"
	"github.com/seckillkit/seckill/order/reconcile"
	"github.com/seckillkit/seckill/order/status"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

// recorder is an observe.Observer that keeps every event.
type recorder struct {
	mu     sync.Mutex
	events []observe.Event
}

func (r *recorder) Observe(_ context.Context, e observe.Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

// of returns the events of stage.
func (r *recorder) of(stage string) []observe.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []observe.Event
	for _, e := range r.events {
		if e.Stage == stage {
			out = append(out, e)
		}
	}
	return out
}

// sums adds up Value per outcome of stage.
func (r *recorder) sums(stage string) map[string]float64 {
	out := map[string]float64{}
	for _, e := range r.of(stage) {
		out[e.Outcome] += e.Value
	}
	return out
}

// The consumer reports each transaction's SUCCESS and FAILED outcomes, a
// failed attempt and a dead-lettered message; the sums match the rows.
func TestObserveConsume(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		addActivity(t, db, "1", 3, 1)
		var failed atomic.Bool
		hookErr := errors.New("shop row refused")
		hook := func(context.Context, *gorm.DB, []order.Order) error {
			if failed.CompareAndSwap(false, true) {
				return hookErr // the first (batch) transaction fails once
			}
			return nil
		}
		rec := &recorder{}
		p := newProc(t, db, order.WithTxHook(hook))
		var dead atomic.Int64
		c, err := order.NewConsumer(p, newLedger(), order.WithObserver(rec), order.WithBackoff(time.Millisecond, time.Millisecond),
			order.WithDeadLetter(deadLetterFunc(func(context.Context, order.Record, error) error { dead.Add(1); return nil })))
		require.NoError(t, err)
		var kms []order.Record
		for i := 0; i < 5; i++ {
			kms = append(kms, kmsg(t, int64(i), msg(i, "1", num(100+i))))
		}
		kms = append(kms, order.Record{Topic: "orders", Offset: 5, Value: []byte("not json")})
		require.NoError(t, runClaim(t, c, &fakeSession{ctx: ctx}, kms))

		assert.EqualValues(t, 3, countOrders(t, db, ""), "3 units in the DB")
		assert.EqualValues(t, 1, dead.Load())
		assert.Equal(t, map[string]float64{"ok": 3, "failed": 2, "error": 5, "dead_letter": 1}, rec.sums(order.StageConsume))
		for _, e := range rec.of(order.StageConsume) {
			if e.Outcome == "error" {
				assert.ErrorIs(t, e.Err, hookErr)
			} else {
				assert.NoError(t, e.Err)
			}
			if e.Outcome != "dead_letter" {
				assert.Equal(t, "1", e.Activity)
			}
		}
	})
}

func TestObserveSubmit(t *testing.T) {
	t.Parallel()
	down := errors.New("down")
	for _, tc := range []struct {
		pub, fb, rel error
		want         string
	}{
		{want: "kafka"},
		{pub: down, want: "outbox"},
		{pub: down, fb: down, want: "released"},
		{pub: down, fb: down, rel: down, want: "error"},
	} {
		rec := &recorder{}
		led := newLedger()
		led.reserve("1", Reservation{ID: "r-1"})
		led.setFail(tc.rel)
		s, err := handoff.NewSubmitter(handoff.Publisher(func(context.Context, order.Message) error { return tc.pub }),
			handoff.Fallback(func(context.Context, order.Message) error { return tc.fb }), led, handoff.WithObserver(rec))
		require.NoError(t, err)
		_, serr := s.Submit(context.Background(), order.Message{ReservationID: "r-1", ActivityID: "1", UserID: "7", Qty: 1})
		evs := rec.of(handoff.StageSubmit)
		require.Len(t, evs, 1, tc.want)
		assert.Equal(t, tc.want, evs[0].Outcome)
		assert.Equal(t, "1", evs[0].Activity)
		if tc.want == "error" {
			assert.Equal(t, serr, evs[0].Err)
		} else {
			assert.NoError(t, evs[0].Err)
		}
	}
	rec := &recorder{}
	s, err := handoff.NewSubmitter(handoff.Publisher(func(context.Context, order.Message) error { return nil }), (&memFallback{}).Store, newLedger(), handoff.WithObserver(rec))
	require.NoError(t, err)
	_, err = s.Submit(context.Background(), order.Message{ReservationID: "r", ActivityID: "1", UserID: "1"})
	require.ErrorIs(t, err, order.ErrInvalidMessage)
	assert.Equal(t, map[string]float64{"invalid": 0}, rec.sums(handoff.StageSubmit))
}

// An adjustment moves stock and total_stock together: reconcile after a
// top-up and a withdrawal finds no drift and releases nothing. A stock
// changed behind the ledger's back is drift, in the report and the gauge.
func TestReconcileAfterAdjustNoDrift(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		addActivity(t, db, "1", 10, 1)
		clock := newClock()
		led := newLedger()
		p := newProc(t, db, order.WithClock(clock))
		var msgs []order.Message
		for i := 0; i < 4; i++ {
			m := msg(i, "1", num(100+i))
			led.reserve("1", Reservation{ID: m.ReservationID, User: m.UserID, Qty: 1, At: clock.Now()})
			msgs = append(msgs, m)
		}
		mustProcess(t, p, msgs)
		_, err := operate.AdjustStock(ctx, db, operate.AdjustParams{Activity: "1", ID: "up", Delta: 5})
		require.NoError(t, err)
		_, err = operate.AdjustStock(ctx, db, operate.AdjustParams{Activity: "1", ID: "down", Delta: -3})
		require.NoError(t, err)
		clock.Add(time.Hour) // every reservation is past the grace period

		rec := &recorder{}
		r, err := reconcile.NewReconciler(db, led.Reservations, led, reconcile.WithClock(clock), reconcile.WithObserver(rec))
		require.NoError(t, err)
		rep, err := r.Reconcile(ctx, "1")
		require.NoError(t, err)
		assert.Equal(t, [4]int64{12, 8, 4, 0}, [4]int64{rep.TotalStock, rep.DBStock, rep.SoldUnits, rep.Drift})
		assert.True(t, rep.Conserved)
		assert.Empty(t, rep.Released)
		assert.Equal(t, 4, rep.Matched)
		assert.Equal(t, 0, led.releases())
		assert.Equal(t, []observe.Event{{Stage: reconcile.StageReconcileDrift, Outcome: "ok", Activity: "1", Gauge: true, Value: 0}}, rec.of(reconcile.StageReconcileDrift))
		evs := rec.of(reconcile.StageReconcile)
		require.Len(t, evs, 1)
		assert.Equal(t, "ok", evs[0].Outcome)
		assert.Zero(t, evs[0].Value)

		// 2 units lost from the DB stock outside the package: drift 2.
		require.NoError(t, db.Exec("UPDATE seckill_activity SET stock = stock - 2 WHERE id = '1'").Error)
		rep, err = r.Reconcile(ctx, "1")
		require.NoError(t, err)
		assert.EqualValues(t, 2, rep.Drift)
		assert.False(t, rep.Conserved)
		drift := rec.of(reconcile.StageReconcileDrift)
		require.Len(t, drift, 2)
		assert.EqualValues(t, 2, drift[1].Value)

		// an unknown activity: an error event, no gauge
		_, err = r.Reconcile(ctx, "nope")
		require.ErrorIs(t, err, order.ErrActivityNotFound)
		evs = rec.of(reconcile.StageReconcile)
		require.Len(t, evs, 3)
		assert.Equal(t, "error", evs[2].Outcome)
		assert.ErrorIs(t, evs[2].Err, order.ErrActivityNotFound)
		assert.Len(t, rec.of(reconcile.StageReconcileDrift), 2)
	})
}

func TestObserveCancel(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		addActivity(t, db, "1", 10, 1)
		clock := newClock()
		p := newProc(t, db, order.WithClock(clock))
		outs := mustProcess(t, p, []order.Message{msg(1, "1", "u1"), msg(2, "1", "u2")})
		rec := &recorder{}
		c, err := status.NewCanceller(db, nil, newLedger(), status.WithClock(clock), status.WithObserver(rec))
		require.NoError(t, err)
		require.NoError(t, c.Cancel(ctx, outs[0].OrderNo))
		require.ErrorIs(t, c.Cancel(ctx, outs[0].OrderNo), status.ErrAlreadyCancelled)
		require.NoError(t, c.Pay(ctx, outs[1].OrderNo))
		require.ErrorIs(t, c.Cancel(ctx, outs[1].OrderNo), status.ErrAlreadyPaid)
		require.ErrorIs(t, c.Cancel(ctx, "42"), status.ErrOrderNotFound)
		var got []string
		for _, e := range rec.of(status.StageCancel) {
			got = append(got, e.Outcome)
			if e.Outcome != "not_found" {
				assert.Equal(t, "1", e.Activity)
			}
		}
		assert.Equal(t, []string{"ok", "already_cancelled", "already_paid", "not_found"}, got)
		assert.EqualValues(t, 9, dbStock(t, db, "1"), "one unit back")
	})
}
