package breaker_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckillkit/seckill/breaker"
	"github.com/seckillkit/seckill/internal/observe"
)

// recorder is an observe.Observer that keeps every event and the value of ctxKey
// in the context it was given.
type recorder struct {
	mu     sync.Mutex
	events []observe.Event
	ctxVal []any
}

type ctxKey struct{}

func (r *recorder) Observe(ctx context.Context, e observe.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
	r.ctxVal = append(r.ctxVal, ctx.Value(ctxKey{}))
}

// take returns the events recorded since the last take.
func (r *recorder) take() ([]observe.Event, []any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, v := r.events, r.ctxVal
	r.events, r.ctxVal = nil, nil
	return e, v
}

func call(outcome string, d time.Duration) observe.Event {
	return observe.Event{Stage: breaker.StageCall, Outcome: outcome, Name: "db", Duration: d}
}

func state(outcome string, v float64) observe.Event {
	return observe.Event{Stage: breaker.StageState, Outcome: outcome, Name: "db", Gauge: true, Value: v}
}

func TestObserverEvents(t *testing.T) {
	clk := newFakeClock()
	rec := &recorder{}
	b, err := breaker.New("db", breaker.WithClock(clk), breaker.WithObserver(rec),
		breaker.WithConsecutiveFailures(2), breaker.WithOpenTimeout(time.Second))
	require.NoError(t, err)
	ev, _ := rec.take()
	require.Equal(t, []observe.Event{state("closed", 0)}, ev, "the state gauge starts at New")

	ctx := context.WithValue(context.Background(), ctxKey{}, "caller")
	work := func(d time.Duration, err error) func(context.Context) error {
		return func(context.Context) error { clk.Advance(d); return err }
	}
	require.NoError(t, b.Execute(ctx, work(5*time.Millisecond, nil)))
	require.ErrorIs(t, b.Execute(ctx, work(3*time.Millisecond, errFail)), errFail)
	require.ErrorIs(t, b.Execute(ctx, work(2*time.Millisecond, context.Canceled)), context.Canceled)
	ev, vals := rec.take()
	require.Equal(t, []observe.Event{
		call("ok", 5*time.Millisecond), call("failure", 3*time.Millisecond), call("ignored", 2*time.Millisecond),
	}, ev)
	assert.Equal(t, []any{"caller", "caller", "caller"}, vals, "calls report the caller's ctx")

	// The second failure in a row trips: the state gauge (delivered as the
	// transition happens) comes before the call that caused it.
	require.ErrorIs(t, b.Execute(ctx, work(time.Millisecond, errFail)), errFail)
	require.ErrorIs(t, b.Execute(ctx, work(time.Millisecond, nil)), breaker.ErrOpen)
	ev, vals = rec.take()
	require.Equal(t, []observe.Event{
		state("open", 2), call("failure", time.Millisecond), call("rejected", 0),
	}, ev)
	assert.Equal(t, []any{"caller", "caller", "caller"}, vals, "the gauge gets the ctx of the call that tripped")

	// Half-open through the two-step Allow, a probe success closes.
	clk.Advance(time.Second)
	done, err := b.Allow()
	require.NoError(t, err)
	_, err = b.Allow()
	require.ErrorIs(t, err, breaker.ErrTooManyProbes)
	clk.Advance(7 * time.Millisecond)
	done(nil)
	done(errFail) // a second done counts (and reports) nothing
	ev, _ = rec.take()
	require.Equal(t, []observe.Event{
		state("half_open", 1), call("rejected", 0), state("closed", 0), call("ok", 7*time.Millisecond),
	}, ev)
	assert.Equal(t, breaker.Closed, b.State())

	// Do, and a panicking call (a failure).
	v, err := breaker.Do(ctx, b, func(context.Context) (int, error) { clk.Advance(4 * time.Millisecond); return 42, nil })
	require.NoError(t, err)
	require.Equal(t, 42, v)
	func() {
		defer func() { require.Equal(t, "boom", recover()) }()
		_ = b.Execute(ctx, func(context.Context) error { clk.Advance(6 * time.Millisecond); panic("boom") })
	}()
	ev, _ = rec.take()
	require.Equal(t, []observe.Event{call("ok", 4*time.Millisecond), call("failure", 6*time.Millisecond)}, ev)
	c := b.Counts()
	assert.Equal(t, uint32(1), c.ConsecutiveFailures, "the panic counted as a failure")
	assert.Equal(t, uint64(2), c.Rejected)
}

// TestObserverRealClock checks, without a fake clock, that a measured call
// has a positive duration and a refusal is reported.
func TestObserverRealClock(t *testing.T) {
	rec := &recorder{}
	b, err := breaker.New("db", breaker.WithObserver(rec), breaker.WithConsecutiveFailures(1),
		breaker.WithOpenTimeout(time.Hour))
	require.NoError(t, err)
	require.NoError(t, b.Execute(context.Background(), func(context.Context) error {
		for t0 := time.Now(); time.Since(t0) < time.Microsecond; { // work to be timed
		}
		return nil
	}))
	require.ErrorIs(t, b.Execute(context.Background(), func(context.Context) error { return errFail }), errFail)
	require.ErrorIs(t, b.Execute(context.Background(), func(context.Context) error { return nil }), breaker.ErrOpen)
	ev, _ := rec.take()
	require.Len(t, ev, 5)
	assert.Equal(t, state("closed", 0), ev[0])
	assert.Equal(t, "ok", ev[1].Outcome)
	assert.GreaterOrEqual(t, ev[1].Duration, time.Microsecond)
	assert.Equal(t, state("open", 2), ev[2])
	assert.Equal(t, "failure", ev[3].Outcome)
	assert.Positive(t, ev[3].Duration)
	assert.Equal(t, "rejected", ev[4].Outcome)
}

func TestObserverNilIgnored(t *testing.T) {
	b, err := breaker.New("db", breaker.WithObserver(nil))
	require.NoError(t, err)
	require.NoError(t, b.Execute(context.Background(), func(context.Context) error { return nil }))
	done, err := b.Allow()
	require.NoError(t, err)
	done(nil)
	assert.Equal(t, uint64(2), b.Counts().Successes)
}

// TestObserverWithHook checks that the observer and the state-change hook
// both see every transition, in order.
func TestObserverWithHook(t *testing.T) {
	clk := newFakeClock()
	rec := &recorder{}
	var hook []breaker.State
	b, err := breaker.New("db", breaker.WithClock(clk), breaker.WithObserver(rec), breaker.WithConsecutiveFailures(1),
		breaker.WithOnStateChange(func(_ context.Context, _ string, _, to breaker.State) { hook = append(hook, to) }))
	require.NoError(t, err)
	_ = b.Execute(context.Background(), func(context.Context) error { return errFail })
	clk.Advance(5 * time.Second) // the default open timeout
	require.Equal(t, breaker.HalfOpen, b.State())
	ev, _ := rec.take()
	require.Equal(t, []observe.Event{state("closed", 0), state("open", 2), call("failure", 0), state("half_open", 1)}, ev)
	assert.Equal(t, []breaker.State{breaker.Open, breaker.HalfOpen}, hook)
}

// TestObserverNoAllocs: with an observer that keeps nothing, Execute and Do
// still allocate nothing.
func TestObserverNoAllocs(t *testing.T) {
	var n int
	b, err := breaker.New("db", breaker.WithObserver(observe.Func(func(context.Context, observe.Event) { n++ })))
	require.NoError(t, err)
	ctx := context.Background()
	ok := func(context.Context) error { return nil }
	okInt := func(context.Context) (int, error) { return 1, nil }
	assert.Zero(t, testing.AllocsPerRun(100, func() { _ = b.Execute(ctx, ok) }))
	assert.Zero(t, testing.AllocsPerRun(100, func() { _, _ = breaker.Do(ctx, b, okInt) }))
	assert.Positive(t, n)
}
