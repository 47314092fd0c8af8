package outbox

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/seckillkit/seckill/internal/observe"
	"github.com/seckillkit/seckill/internal/testenv"
)

// obsRecorder is an observe.Observer that keeps every event and checks it was
// given the caller's context; gauges also go to the gauges channel when
// it is set.
type obsRecorder struct {
	mu     sync.Mutex
	events []observe.Event
	ctxOK  bool
	gauges chan observe.Event
}

type obsCtxKey struct{}

var callerCtx = context.WithValue(context.Background(), obsCtxKey{}, "caller")

func newObsRecorder() *obsRecorder { return &obsRecorder{ctxOK: true} }

func (r *obsRecorder) Observe(ctx context.Context, e observe.Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.ctxOK = r.ctxOK && ctx.Value(obsCtxKey{}) == "caller"
	r.mu.Unlock()
	if e.Gauge && r.gauges != nil {
		r.gauges <- e
	}
}

// obs is what a test asserts of an event besides its Duration (positive
// for operations, zero for gauges) and its Err (set exactly for "error").
type obs struct {
	stage, outcome string
	value          float64
}

func (r *obsRecorder) take(t *testing.T) ([]obs, []observe.Event) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	assert.True(t, r.ctxOK, "every event carries the caller's ctx")
	out := make([]obs, len(r.events))
	for i, e := range r.events {
		if e.Gauge {
			assert.Zero(t, e.Duration, "event %d %+v", i, e)
		} else {
			assert.Positive(t, e.Duration, "event %d %+v", i, e)
		}
		assert.Empty(t, e.Activity)
		assert.Empty(t, e.Name)
		assert.Equal(t, e.Outcome == "error", e.Err != nil, "event %d %+v", i, e)
		out[i] = obs{e.Stage, e.Outcome, e.Value}
	}
	ev := r.events
	r.events = nil
	return out, ev
}

func TestObserverWriter(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, kind testenv.DBKind, db *gorm.DB) {
		ctx := callerCtx
		rec := newObsRecorder()
		w, err := NewWriter(WithObserver(rec))
		require.NoError(t, err)
		require.NoError(t, w.Write(ctx, db, Message{Topic: "t", MsgID: "a"}, Message{Topic: "t", MsgID: "b"}))
		require.ErrorIs(t, w.Write(ctx, db, Message{Topic: ""}), ErrInvalidArgument)
		require.ErrorIs(t, w.Write(ctx, db, Message{Topic: "t", MsgID: "a"}), ErrDuplicateMsgID)
		require.ErrorIs(t, w.Write(ctx, nil, Message{Topic: "t"}), ErrInvalidArgument)
		require.NoError(t, w.Write(ctx, db)) // nothing to write: nothing reported

		ok := PublisherFunc(func(context.Context, Message) error { return nil })
		down := PublisherFunc(func(context.Context, Message) error { return errors.New("broker down") })
		res, err := w.SendOrStore(ctx, db, ok, Message{Topic: "t"})
		require.NoError(t, err)
		require.Equal(t, Published, res.Delivery)
		res, err = w.SendOrStore(ctx, db, down, Message{Topic: "t", MsgID: "c"})
		require.NoError(t, err)
		require.Equal(t, Stored, res.Delivery)
		_, err = w.SendOrStore(ctx, db, down, Message{Topic: ""})
		require.ErrorIs(t, err, ErrInvalidArgument)
		missing, err := NewWriter(WithObserver(rec), WithTable("no_such_table"))
		require.NoError(t, err)
		_, err = missing.SendOrStore(ctx, db, down, Message{Topic: "t"})
		require.ErrorIs(t, err, ErrUndelivered)

		got, ev := rec.take(t)
		assert.Equal(t, []obs{
			{StageWrite, "ok", 2}, {StageWrite, "invalid", 1}, {StageWrite, "duplicate", 1}, {StageWrite, "invalid", 1},
			{StageSend, "published", 0}, {StageWrite, "ok", 1}, {StageSend, "stored", 0}, {StageSend, "invalid", 0},
			{StageWrite, "error", 1}, {StageSend, "undelivered", 0},
		}, got)
		assert.NoError(t, ev[3].Err, "a nil tx is bad input (invalid), not a store error")
		assert.Error(t, ev[8].Err, "the failed store carries its error")
		assert.EqualValues(t, 3, countStatus(t, db, StatusPending), "a, b and the stored c")
	})
}

// TestObserverRelayAndFailedRows: a batch's outcomes, the backlog gauges,
// listing FAILED rows and putting them back, on every database.
func TestObserverRelayAndFailedRows(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, kind testenv.DBKind, db *gorm.DB) {
		ctx := callerCtx
		clk := newFakeClock()
		t0 := clk.Now()
		w, err := NewWriter(WithClock(clk))
		require.NoError(t, err)
		require.NoError(t, w.Write(ctx, db, Message{Topic: "t", MsgID: "a"}, Message{Topic: "t", MsgID: "bad1"},
			Message{Topic: "t", MsgID: "bad2"}))
		pub := PublisherFunc(func(_ context.Context, m Message) error {
			if m.MsgID != "a" {
				return errors.New("too big")
			}
			return nil
		})
		rec := newObsRecorder()
		r, err := NewRelay(db, pub, WithClock(clk), WithObserver(rec), WithMaxAttempts(2), WithJitter(0),
			WithBackoff(time.Second, time.Second))
		require.NoError(t, err)

		b, err := r.RunOnce(ctx)
		require.NoError(t, err)
		require.Equal(t, Batch{Claimed: 3, Sent: 1, Retried: 2}, b)
		clk.Advance(time.Second)
		b, err = r.RunOnce(ctx)
		require.NoError(t, err)
		require.Equal(t, Batch{Claimed: 2, Failed: 2}, b)
		b, err = r.RunOnce(ctx)
		require.NoError(t, err)
		require.Zero(t, b.Claimed)
		bl, err := r.backlog(ctx)
		require.NoError(t, err)
		require.Equal(t, Backlog{Failed: 2}, bl)
		got, _ := rec.take(t)
		assert.Equal(t, []obs{
			{StagePublish, "sent", 1}, {StagePublish, "retry", 2}, {StagePublish, "failed", 2},
			{StagePending, "ok", 0}, {StageOldestPending, "ok", 0}, {StageFailed, "ok", 2},
		}, got, "an empty poll reports nothing")

		// List, then requeue one FAILED row: only FAILED rows move, once.
		_, err = Failed(ctx, db, 0)
		require.ErrorIs(t, err, ErrInvalidArgument)
		one, err := Failed(ctx, db, 1)
		require.NoError(t, err)
		require.Len(t, one, 1)
		assert.Equal(t, "bad1", one[0].MsgID, "oldest first")
		failed, err := Failed(ctx, db, 10)
		require.NoError(t, err)
		require.Len(t, failed, 2)
		for _, m := range failed {
			assert.Equal(t, StatusFailed, m.Status)
			assert.Equal(t, 2, m.Attempts)
			assert.Equal(t, "too big", m.LastError)
		}
		sent, found, err := Lookup(ctx, db, "a")
		require.NoError(t, err)
		require.True(t, found)
		n, err := r.Requeue(ctx, failed[0].ID, sent.ID)
		require.NoError(t, err)
		assert.EqualValues(t, 1, n, "the SENT row is not moved")
		n, err = r.Requeue(ctx, failed[0].ID)
		require.NoError(t, err)
		assert.EqualValues(t, 0, n, "already requeued")
		back, _, err := Lookup(ctx, db, "bad1")
		require.NoError(t, err)
		assert.Equal(t, StatusPending, back.Status)
		assert.Zero(t, back.Attempts, "a fresh attempt budget")
		left, err := Failed(ctx, db, 10)
		require.NoError(t, err)
		require.Len(t, left, 1)
		assert.Equal(t, "bad2", left[0].MsgID)
		assert.EqualValues(t, 1, countStatus(t, db, StatusSent))

		// The requeued row is pending since t0, read one second later.
		_, err = r.backlog(ctx)
		require.NoError(t, err)
		got, _ = rec.take(t)
		assert.Equal(t, []obs{{StagePending, "ok", 1}, {StageOldestPending, "ok", clk.Now().Sub(t0).Seconds()}, {StageFailed, "ok", 1}}, got)
		assert.Equal(t, 1.0, got[1].value)

		// A claim that fails is an error.
		require.NoError(t, db.Migrator().DropTable(&Message{}))
		_, err = r.RunOnce(ctx)
		require.Error(t, err)
		got, ev := rec.take(t)
		require.Equal(t, []obs{{StagePublish, "error", 0}}, got)
		assert.ErrorIs(t, ev[0].Err, err)
	})
}

// TestObserverRunReportsBacklog: Run reads the backlog at its first poll
// and then once per WithBacklogInterval of the relay's clock.
func TestObserverRunReportsBacklog(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, kind testenv.DBKind, db *gorm.DB) {
		clk := newFakeClock()
		w, err := NewWriter(WithClock(clk))
		require.NoError(t, err)
		require.NoError(t, w.Write(callerCtx, db, Message{Topic: "t"}, Message{Topic: "t"}))
		rec := newObsRecorder()
		rec.gauges = make(chan observe.Event, 100)
		down := PublisherFunc(func(context.Context, Message) error { return errors.New("broker down") })
		r, err := NewRelay(db, down, WithClock(clk), WithObserver(rec), WithPollInterval(time.Millisecond),
			WithBackoff(time.Hour, time.Hour), WithBacklogInterval(10*time.Second), WithoutCleanup())
		require.NoError(t, err)
		done := make(chan error, 1)
		go func() { done <- r.Run(callerCtx) }()
		read := func() []obs {
			var out []obs
			for range 3 {
				select {
				case e := <-rec.gauges:
					out = append(out, obs{e.Stage, e.Outcome, e.Value})
				case <-time.After(30 * time.Second):
					t.Fatal("no backlog gauge")
				}
			}
			return out
		}
		assert.Equal(t, []obs{{StagePending, "ok", 2}, {StageOldestPending, "ok", 0}, {StageFailed, "ok", 0}}, read())
		clk.Advance(10 * time.Second)
		assert.Equal(t, []obs{{StagePending, "ok", 2}, {StageOldestPending, "ok", 10}, {StageFailed, "ok", 0}}, read())
		require.NoError(t, r.Close())
		require.NoError(t, <-done)
		got, _ := rec.take(t)
		var gauges, retries int
		for _, e := range got {
			if e.stage == StagePublish {
				assert.Equal(t, obs{StagePublish, "retry", 2}, e)
				retries++
			} else {
				gauges++
			}
		}
		assert.Equal(t, 6, gauges, "the clock moved once: two readings, no more")
		assert.Equal(t, 1, retries, "both rows wait an hour after their one attempt")
		assert.Empty(t, rec.gauges)
	})
}

func TestObserverOptions(t *testing.T) {
	t.Parallel()
	db := testenv.SQLite(t)
	_, err := NewRelay(db, PublisherFunc(func(context.Context, Message) error { return nil }), WithBacklogInterval(0))
	require.ErrorIs(t, err, ErrInvalidConfig)
	w, err := NewWriter(WithObserver(nil))
	require.NoError(t, err)
	require.NoError(t, AutoMigrate(context.Background(), db))
	require.NoError(t, w.Write(context.Background(), db, Message{Topic: "t"}))
	_, err = Failed(context.Background(), nil, 1)
	require.ErrorIs(t, err, ErrInvalidArgument)
}

// A RunOnce whose context has ended (as Close ends Run's) reports no
// "error": the claim was cut short by the caller, not failed by the store.
// Before, it did, and Run's test flaked when Close interrupted a claim.
func TestObserverCancelledRunOnceIsNotAnError(t *testing.T) {
	t.Parallel()
	db := testenv.SQLite(t)
	require.NoError(t, AutoMigrate(context.Background(), db))
	w, err := NewWriter()
	require.NoError(t, err)
	require.NoError(t, w.Write(context.Background(), db, Message{Topic: "t"}))
	rec := newObsRecorder()
	r, err := NewRelay(db, PublisherFunc(func(context.Context, Message) error { return nil }), WithObserver(rec))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(callerCtx)
	cancel()
	_, err = r.RunOnce(ctx)
	require.Error(t, err, "a cancelled claim fails")
	got, _ := rec.take(t)
	for _, e := range got {
		assert.NotEqual(t, "error", e.outcome, "event %+v", e)
	}
}
