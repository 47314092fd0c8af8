package breaker_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckillkit/seckill/breaker"
)

var errFail = errors.New("dependency down")

// step is one call (or pure clock move) in a time-driven table.
type step struct {
	advance time.Duration // moved before the call
	do      string        // "ok", "fail", "cancel", "deadline", "" (no call)
	want    error         // error Execute must return
	state   breaker.State // State() after the step
}

func fnFor(t *testing.T, do string, ran *bool) func(context.Context) error {
	return func(context.Context) error {
		*ran = true
		switch do {
		case "ok":
			return nil
		case "fail":
			return errFail
		case "cancel":
			return fmt.Errorf("wrapped: %w", context.Canceled)
		case "deadline":
			return context.DeadlineExceeded
		}
		t.Fatalf("bad step %q", do)
		return nil
	}
}

func runSteps(t *testing.T, b *breaker.Breaker, clk *fakeClock, steps []step) {
	t.Helper()
	for i, s := range steps {
		clk.Advance(s.advance)
		if s.do != "" {
			ran := false
			err := b.Execute(context.Background(), fnFor(t, s.do, &ran))
			if s.want == nil {
				require.NoError(t, err, "step %d", i)
			} else {
				require.ErrorIs(t, err, s.want, "step %d", i)
			}
			refused := errors.Is(err, breaker.ErrOpen) || errors.Is(err, breaker.ErrTooManyProbes)
			require.Equal(t, !refused, ran, "step %d: fn ran", i)
		}
		require.Equal(t, s.state, b.State(), "step %d (%+v)", i, s)
	}
}

func TestTransitions(t *testing.T) {
	t.Parallel()
	const timeout = 5 * time.Second
	cases := []struct {
		name  string
		opts  []breaker.Option
		steps []step
	}{
		{
			name: "consecutive failures trip; a success resets the run",
			opts: []breaker.Option{breaker.WithConsecutiveFailures(3)},
			steps: []step{
				{do: "fail", want: errFail, state: breaker.Closed},
				{do: "fail", want: errFail, state: breaker.Closed},
				{do: "ok", state: breaker.Closed},
				{do: "fail", want: errFail, state: breaker.Closed},
				{do: "fail", want: errFail, state: breaker.Closed},
				{do: "fail", want: errFail, state: breaker.Open},
				{do: "ok", want: breaker.ErrOpen, state: breaker.Open},
			},
		},
		{
			name: "open until the timeout, to the nanosecond; a probe success closes",
			opts: []breaker.Option{breaker.WithConsecutiveFailures(1)},
			steps: []step{
				{do: "fail", want: errFail, state: breaker.Open},
				{advance: timeout - time.Nanosecond, do: "ok", want: breaker.ErrOpen, state: breaker.Open},
				{advance: time.Nanosecond, state: breaker.HalfOpen},
				{do: "ok", state: breaker.Closed},
				{do: "ok", state: breaker.Closed},
			},
		},
		{
			name: "a probe failure reopens with a fresh timeout",
			opts: []breaker.Option{breaker.WithConsecutiveFailures(1)},
			steps: []step{
				{do: "fail", want: errFail, state: breaker.Open},
				{advance: timeout, do: "fail", want: errFail, state: breaker.Open},
				{advance: timeout - 1, do: "ok", want: breaker.ErrOpen, state: breaker.Open},
				{advance: 1, do: "deadline", want: context.DeadlineExceeded, state: breaker.Open},
				{advance: timeout, do: "ok", state: breaker.Closed},
			},
		},
		{
			name: "several successes needed to close",
			opts: []breaker.Option{breaker.WithConsecutiveFailures(1), breaker.WithSuccessesToClose(3)},
			steps: []step{
				{do: "fail", want: errFail, state: breaker.Open},
				{advance: timeout, do: "ok", state: breaker.HalfOpen},
				{do: "ok", state: breaker.HalfOpen},
				{do: "cancel", want: context.Canceled, state: breaker.HalfOpen},
				{do: "ok", state: breaker.Closed},
			},
		},
		{
			name: "a failure among half-open successes reopens and restarts the count",
			opts: []breaker.Option{breaker.WithConsecutiveFailures(1), breaker.WithSuccessesToClose(2)},
			steps: []step{
				{do: "fail", want: errFail, state: breaker.Open},
				{advance: timeout, do: "ok", state: breaker.HalfOpen},
				{do: "fail", want: errFail, state: breaker.Open},
				{advance: timeout, do: "ok", state: breaker.HalfOpen},
				{do: "ok", state: breaker.Closed},
			},
		},
		{
			name: "canceled calls neither count nor reset the run",
			opts: []breaker.Option{breaker.WithConsecutiveFailures(2)},
			steps: []step{
				{do: "fail", want: errFail, state: breaker.Closed},
				{do: "cancel", want: context.Canceled, state: breaker.Closed},
				{do: "cancel", want: context.Canceled, state: breaker.Closed},
				{do: "fail", want: errFail, state: breaker.Open},
			},
		},
		{
			name: "closing starts a fresh run of consecutive failures",
			opts: []breaker.Option{breaker.WithConsecutiveFailures(2)},
			steps: []step{
				{do: "fail", want: errFail, state: breaker.Closed},
				{do: "fail", want: errFail, state: breaker.Open},
				{advance: timeout, do: "ok", state: breaker.Closed},
				{do: "fail", want: errFail, state: breaker.Closed},
				{do: "fail", want: errFail, state: breaker.Open},
			},
		},
		{
			name: "a long quiet time in closed changes nothing",
			opts: []breaker.Option{breaker.WithConsecutiveFailures(2)},
			steps: []step{
				{do: "fail", want: errFail, state: breaker.Closed},
				{advance: 24 * time.Hour, do: "fail", want: errFail, state: breaker.Open},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clk := newFakeClock()
			b, err := breaker.New("t", append([]breaker.Option{breaker.WithClock(clk), breaker.WithOpenTimeout(timeout)}, tc.opts...)...)
			require.NoError(t, err)
			runSteps(t, b, clk, tc.steps)
		})
	}
}

func TestFailureRatioWindow(t *testing.T) {
	t.Parallel()
	// 10s window of 10 one-second buckets; trip at >= 50% failures over >= 10
	// results; the consecutive condition is off so only the ratio trips.
	base := []breaker.Option{
		breaker.WithConsecutiveFailures(0), breaker.WithFailureRatio(0.5, 10),
		breaker.WithWindow(10*time.Second, 10), breaker.WithOpenTimeout(time.Minute),
	}
	rep := func(n int, s step) []step {
		out := make([]step, n)
		for i := range out {
			out[i] = s
		}
		return out
	}
	cat := func(parts ...[]step) []step {
		var out []step
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	okS := step{do: "ok", state: breaker.Closed}
	failS := step{do: "fail", want: errFail, state: breaker.Closed}
	tripS := step{do: "fail", want: errFail, state: breaker.Open}
	cases := []struct {
		name  string
		opts  []breaker.Option
		steps []step
	}{
		{
			name:  "below min requests never trips, even at 100%",
			steps: cat(rep(9, failS), []step{tripS}),
		},
		{
			name:  "min requests counts successes too",
			steps: cat(rep(5, okS), rep(4, failS), []step{tripS}),
		},
		{
			name:  "just below the ratio stays closed",
			steps: cat(rep(6, okS), rep(5, failS), []step{tripS}), // 5/11 then 6/12
		},
		{
			name: "ignored calls count neither way",
			steps: cat(rep(9, failS), rep(5, step{do: "cancel", want: context.Canceled, state: breaker.Closed}),
				[]step{tripS}),
		},
		{
			name: "successes roll out of the window at the bucket edge",
			steps: cat(rep(10, okS), // bucket 0 (t=0)
				[]step{{advance: 10*time.Second - time.Nanosecond, do: "fail", want: errFail, state: breaker.Closed}},
				rep(8, failS), // t=9.999999999s: 10 ok / 9 fail
				[]step{{advance: time.Nanosecond, do: "fail", want: errFail, state: breaker.Open}}, // t=10s: bucket 0 gone: 0/10
			),
		},
		{
			name: "failures roll out too",
			steps: cat(rep(9, failS), // t=0
				[]step{{advance: 10 * time.Second, do: "fail", want: errFail, state: breaker.Closed}}, // 1/1
				rep(8, failS), // 9/9 in the window
				[]step{tripS}),
		},
		{
			name: "results in a middle bucket survive while older ones expire",
			steps: cat(rep(5, okS),
				[]step{{advance: 5 * time.Second, do: "ok", state: breaker.Closed}}, // bucket 5
				rep(4, okS),
				[]step{{advance: 5 * time.Second, do: "fail", want: errFail, state: breaker.Closed}}, // t=10: 5 ok (bucket 5) / 1
				rep(3, failS), // 5/4
				[]step{tripS}, // 5/5
			),
		},
		{
			name: "a quiet period longer than the window forgets everything",
			steps: cat(rep(9, failS),
				[]step{{advance: time.Hour, do: "fail", want: errFail, state: breaker.Closed}},
				rep(8, failS), []step{tripS}),
		},
		{
			name:  "consecutive and ratio together: consecutive trips first",
			opts:  []breaker.Option{breaker.WithConsecutiveFailures(3)},
			steps: cat(rep(20, okS), rep(2, failS), []step{tripS}),
		},
		{
			name: "closing after a ratio trip starts an empty window",
			steps: cat(rep(10, failS)[:9], []step{tripS},
				[]step{{advance: time.Minute, do: "ok", state: breaker.Closed}}, // probe closes
				rep(9, failS),  // the probe belonged to half-open: 9 results, below min requests
				[]step{tripS}), // 10/10
		},
		{
			name:  "ratio 1 needs every result to fail",
			opts:  []breaker.Option{breaker.WithFailureRatio(1, 3)},
			steps: cat([]step{okS}, rep(10, failS), []step{{advance: 10 * time.Second, do: "fail", want: errFail, state: breaker.Closed}}, rep(1, failS), []step{tripS}),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clk := newFakeClock()
			b, err := breaker.New("t", append(append([]breaker.Option{breaker.WithClock(clk)}, base...), tc.opts...)...)
			require.NoError(t, err)
			runSteps(t, b, clk, tc.steps)
		})
	}
}

func TestCountsWindowRollover(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	b, err := breaker.New("t", breaker.WithClock(clk), breaker.WithWindow(4*time.Second, 4), breaker.WithConsecutiveFailures(100))
	require.NoError(t, err)
	ctx := context.Background()
	ok := func(context.Context) error { return nil }
	fail := func(context.Context) error { return errFail }
	cancel := func(context.Context) error { return context.Canceled }

	_ = b.Execute(ctx, ok) // bucket 0
	clk.Advance(1500 * time.Millisecond)
	_ = b.Execute(ctx, fail) // bucket 1
	_ = b.Execute(ctx, fail)
	clk.Advance(time.Second)
	_ = b.Execute(ctx, cancel) // bucket 2
	c := b.Counts()
	assert.Equal(t, breaker.Counts{State: breaker.Closed, Successes: 1, Failures: 2, Ignored: 1, ConsecutiveFailures: 2}, c)
	assert.Equal(t, uint64(4), c.Requests())

	clk.Advance(1500 * time.Millisecond) // t=4s: bucket 0 leaves
	assert.Equal(t, breaker.Counts{State: breaker.Closed, Failures: 2, Ignored: 1, ConsecutiveFailures: 2}, b.Counts())
	clk.Advance(time.Second) // t=5s: bucket 1 leaves
	assert.Equal(t, breaker.Counts{State: breaker.Closed, Ignored: 1, ConsecutiveFailures: 2}, b.Counts())
	_ = b.Execute(ctx, ok) // bucket 5 reuses slot 1
	assert.Equal(t, breaker.Counts{State: breaker.Closed, Successes: 1, Ignored: 1}, b.Counts())
	clk.Advance(time.Hour)
	assert.Equal(t, breaker.Counts{State: breaker.Closed}, b.Counts())
}

func TestCountsWithoutWindow(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	b, err := breaker.New("t", breaker.WithClock(clk), breaker.WithConsecutiveFailures(2), breaker.WithOpenTimeout(time.Second),
		breaker.WithProbeLimit(2), breaker.WithSuccessesToClose(2))
	require.NoError(t, err)
	ctx := context.Background()
	ok := func(context.Context) error { return nil }
	fail := func(context.Context) error { return errFail }
	for range 3 {
		_ = b.Execute(ctx, ok)
	}
	clk.Advance(time.Hour) // no window: nothing expires
	_ = b.Execute(ctx, fail)
	assert.Equal(t, breaker.Counts{State: breaker.Closed, Successes: 3, Failures: 1, ConsecutiveFailures: 1}, b.Counts())
	_ = b.Execute(ctx, fail)
	assert.Equal(t, breaker.Counts{State: breaker.Open}, b.Counts())
	_ = b.Execute(ctx, ok)
	_ = b.Execute(ctx, ok)
	assert.Equal(t, breaker.Counts{State: breaker.Open, Rejected: 2}, b.Counts())
	clk.Advance(time.Second)
	_ = b.Execute(ctx, ok)
	assert.Equal(t, breaker.Counts{State: breaker.HalfOpen, Successes: 1, Rejected: 2}, b.Counts())
	_ = b.Execute(ctx, func(context.Context) error { return context.Canceled })
	assert.Equal(t, breaker.Counts{State: breaker.HalfOpen, Successes: 1, Ignored: 1, Rejected: 2}, b.Counts())
	_ = b.Execute(ctx, ok)
	assert.Equal(t, breaker.Counts{State: breaker.Closed, Rejected: 2}, b.Counts(), "closing starts from zero")
}

func TestClassifier(t *testing.T) {
	t.Parallel()
	errBusiness := errors.New("sold out")
	errWeird := errors.New("weird")
	classify := func(err error) breaker.Outcome {
		switch {
		case errors.Is(err, errBusiness):
			return breaker.Success // a business refusal proves the dependency answered
		case errors.Is(err, errWeird):
			return breaker.Outcome(42) // out of range: counts as a failure
		case errors.Is(err, context.Canceled):
			return breaker.Failure
		}
		return breaker.Ignore
	}
	clk := newFakeClock()
	b, err := breaker.New("t", breaker.WithClock(clk), breaker.WithConsecutiveFailures(2), breaker.WithClassifier(classify))
	require.NoError(t, err)
	ctx := context.Background()
	ret := func(e error) func(context.Context) error { return func(context.Context) error { return e } }

	require.ErrorIs(t, b.Execute(ctx, ret(errBusiness)), errBusiness, "the error is returned unchanged")
	require.ErrorIs(t, b.Execute(ctx, ret(errFail)), errFail)
	assert.Equal(t, breaker.Counts{State: breaker.Closed, Successes: 1, Ignored: 1}, b.Counts())
	_ = b.Execute(ctx, ret(errWeird))
	_ = b.Execute(ctx, ret(errBusiness))
	_ = b.Execute(ctx, ret(context.Canceled))
	assert.Equal(t, breaker.Closed, b.State())
	_ = b.Execute(ctx, ret(errWeird))
	assert.Equal(t, breaker.Open, b.State())

	t.Run("default", func(t *testing.T) {
		t.Parallel()
		assert.Equal(t, breaker.Ignore, breaker.DefaultClassifier(context.Canceled))
		assert.Equal(t, breaker.Ignore, breaker.DefaultClassifier(fmt.Errorf("op: %w", context.Canceled)))
		assert.Equal(t, breaker.Failure, breaker.DefaultClassifier(context.DeadlineExceeded))
		assert.Equal(t, breaker.Failure, breaker.DefaultClassifier(errFail))
	})
	t.Run("nil error is a success without asking the classifier", func(t *testing.T) {
		t.Parallel()
		called := false
		b, err := breaker.New("t", breaker.WithClassifier(func(error) breaker.Outcome { called = true; return breaker.Failure }))
		require.NoError(t, err)
		require.NoError(t, b.Execute(ctx, ret(nil)))
		assert.False(t, called)
		assert.Equal(t, uint64(1), b.Counts().Successes)
	})
}

func TestNilFunc(t *testing.T) {
	t.Parallel()
	b, err := breaker.New("t")
	require.NoError(t, err)
	require.ErrorIs(t, b.Execute(context.Background(), nil), breaker.ErrInvalidArgument)
	_, err = breaker.Do[int](context.Background(), b, nil)
	require.ErrorIs(t, err, breaker.ErrInvalidArgument)
	assert.Equal(t, breaker.Counts{State: breaker.Closed}, b.Counts())
}

func TestDo(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	b, err := breaker.New("t", breaker.WithClock(clk), breaker.WithConsecutiveFailures(1))
	require.NoError(t, err)
	ctx := context.Background()
	v, err := breaker.Do(ctx, b, func(context.Context) (string, error) { return "stock=3", nil })
	require.NoError(t, err)
	assert.Equal(t, "stock=3", v)
	v, err = breaker.Do(ctx, b, func(context.Context) (string, error) { return "partial", errFail })
	require.ErrorIs(t, err, errFail)
	assert.Equal(t, "partial", v, "fn's value is returned with its error")
	ran := false
	v, err = breaker.Do(ctx, b, func(context.Context) (string, error) { ran = true; return "x", nil })
	require.ErrorIs(t, err, breaker.ErrOpen)
	assert.False(t, ran)
	assert.Equal(t, "", v)
}

func TestExecutePassesContext(t *testing.T) {
	t.Parallel()
	b, err := breaker.New("t")
	require.NoError(t, err)
	type key struct{}
	ctx := context.WithValue(context.Background(), key{}, "v")
	require.NoError(t, b.Execute(ctx, func(got context.Context) error {
		assert.Equal(t, "v", got.Value(key{}))
		return nil
	}))
}

func TestClockBeforeBase(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	b, err := breaker.New("t", breaker.WithClock(clk), breaker.WithFailureRatio(0.5, 2), breaker.WithWindow(time.Second, 3))
	require.NoError(t, err)
	clk.Advance(-time.Hour)
	ctx := context.Background()
	require.NotPanics(t, func() {
		_ = b.Execute(ctx, func(context.Context) error { return nil })
		_ = b.Execute(ctx, func(context.Context) error { return errFail })
	})
	assert.Equal(t, breaker.Open, b.State())
}

func TestClockGoingBackwardsInWindow(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	b, err := breaker.New("t", breaker.WithClock(clk), breaker.WithConsecutiveFailures(100), breaker.WithWindow(4*time.Second, 4))
	require.NoError(t, err)
	ctx := context.Background()
	clk.Advance(10 * time.Second)
	_ = b.Execute(ctx, func(context.Context) error { return nil }) // epoch 10 in slot 2
	clk.Advance(-4 * time.Second)
	// epoch 6 maps to slot 2 too, which holds a newer epoch: the result is
	// more than a window older than what was seen and is not counted.
	_ = b.Execute(ctx, func(context.Context) error { return errFail })
	clk.Advance(4 * time.Second)
	assert.Equal(t, breaker.Counts{State: breaker.Closed, Successes: 1, ConsecutiveFailures: 1}, b.Counts())
}

func TestHotPathsDoNotAllocate(t *testing.T) {
	ctx := context.Background()
	ok := func(context.Context) error { return nil }
	okInt := func(context.Context) (int, error) { return 1, nil }
	fail := func(context.Context) error { return errFail }
	for _, window := range []bool{false, true} {
		opts := []breaker.Option{breaker.WithConsecutiveFailures(1 << 30)}
		if window {
			opts = append(opts, breaker.WithFailureRatio(1, 1<<30))
		}
		b, err := breaker.New("t", opts...)
		require.NoError(t, err)
		assert.Zero(t, testing.AllocsPerRun(1000, func() { _ = b.Execute(ctx, ok) }), "Execute window=%v", window)
		assert.Zero(t, testing.AllocsPerRun(1000, func() { _ = b.Execute(ctx, fail) }), "Execute failing window=%v", window)
		assert.Zero(t, testing.AllocsPerRun(1000, func() { _, _ = breaker.Do(ctx, b, okInt) }), "Do window=%v", window)
	}
	open, err := breaker.New("t", breaker.WithConsecutiveFailures(1), breaker.WithOpenTimeout(time.Hour))
	require.NoError(t, err)
	_ = open.Execute(ctx, fail)
	assert.Zero(t, testing.AllocsPerRun(1000, func() { _ = open.Execute(ctx, ok) }), "open reject")
}

func TestHugeOpenTimeoutDoesNotWrap(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	clk.Advance(time.Hour)
	b, err := breaker.New("t", breaker.WithClock(clk), breaker.WithConsecutiveFailures(1), breaker.WithOpenTimeout(time.Duration(math.MaxInt64)))
	require.NoError(t, err)
	clk.Advance(time.Hour)
	_ = b.Execute(context.Background(), func(context.Context) error { return errFail })
	clk.Advance(1000 * time.Hour)
	require.ErrorIs(t, b.Execute(context.Background(), func(context.Context) error { return nil }), breaker.ErrOpen)
	assert.Equal(t, breaker.Open, b.State())
}
