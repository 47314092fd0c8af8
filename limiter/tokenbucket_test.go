package limiter_test

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckillkit/seckill/limiter"
)

func TestNewTokenBucketValidation(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		rate  limiter.Limit
		burst int
		ok    bool
	}{
		{"positive", 10, 5, true},
		{"inf burst 0", limiter.Inf, 0, true},
		{"zero rate quota", 0, 3, true},
		{"zero rate zero burst (deny all)", 0, 0, true},
		{"negative rate", -1, 5, false},
		{"NaN rate", limiter.Limit(math.NaN()), 5, false},
		{"negative inf", limiter.Limit(math.Inf(-1)), 5, false},
		{"negative burst", 10, -1, false},
		{"positive rate zero burst", 10, 0, false},
		{"span too long", 1e-12, math.MaxInt32, false},
		{"tiny rate ok", 1e-3, 1, true},
		{"huge rate ok", 1e12, 1, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b, err := limiter.NewTokenBucket(tc.rate, tc.burst)
			if tc.ok {
				require.NoError(t, err)
				require.NotNil(t, b)
			} else {
				require.ErrorIs(t, err, limiter.ErrInvalidConfig)
				require.Nil(t, b)
			}
		})
	}
}

func TestTokenBucketTimeTable(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	b, err := limiter.NewTokenBucket(10, 3, limiter.WithClock(clk)) // 1 token / 100ms
	require.NoError(t, err)
	steps := []struct {
		advance time.Duration
		n       int
		want    bool
	}{
		{0, 1, true}, {0, 1, true}, {0, 1, true}, // burst
		{0, 1, false},
		{99 * time.Millisecond, 1, false},
		{1 * time.Millisecond, 1, true}, // 100ms: one token
		{0, 1, false},
		{300 * time.Millisecond, 3, true}, // refilled to burst
		{time.Hour, 4, false},             // n > burst never
		{0, 0, false},                     // n < 1
		{0, 3, true},                      // the refused calls spent nothing
		{150 * time.Millisecond, 2, false},
		{50 * time.Millisecond, 2, true},
	}
	for i, s := range steps {
		clk.Advance(s.advance)
		assert.Equal(t, s.want, b.AllowN(s.n), "step %d", i)
	}
}

func TestTokenBucketFollowsClock(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	b, err := limiter.NewTokenBucket(2, 2, limiter.WithClock(clk))
	require.NoError(t, err)
	assert.True(t, b.AllowN(2))
	clk.Advance(499 * time.Millisecond)
	assert.False(t, b.AllowN(1))
	clk.Advance(time.Millisecond)
	assert.True(t, b.AllowN(1))
	clk.Advance(250 * time.Millisecond)
	assert.InDelta(t, 0.5, b.Tokens(), 1e-6)
	clk.Advance(10 * time.Second)
	assert.InDelta(t, 2.0, b.Tokens(), 1e-9)
}

func TestTokenBucketSpecialRates(t *testing.T) {
	t.Parallel()
	t.Run("inf allows everything", func(t *testing.T) {
		b, err := limiter.NewTokenBucket(limiter.Inf, 0)
		require.NoError(t, err)
		for range 1000 {
			require.True(t, b.AllowN(1_000_000))
		}
		require.NoError(t, b.WaitN(context.Background(), 1_000_000))
		assert.True(t, math.IsInf(b.Tokens(), 1))
	})
	t.Run("zero rate is a fixed quota", func(t *testing.T) {
		clk := newFakeClock()
		b, err := limiter.NewTokenBucket(0, 2, limiter.WithClock(clk))
		require.NoError(t, err)
		assert.True(t, b.Allow())
		assert.True(t, b.Allow())
		assert.False(t, b.Allow())
		clk.Advance(24 * time.Hour)
		assert.False(t, b.Allow(), "rate 0 never refills")
		err = b.Wait(context.Background())
		assert.ErrorIs(t, err, limiter.ErrRefused, "Wait must not hang on rate 0")
		b.RefundN(1)
		assert.True(t, b.Allow(), "refund restores quota")
	})
	t.Run("zero rate zero burst refuses all", func(t *testing.T) {
		b, err := limiter.NewTokenBucket(0, 0)
		require.NoError(t, err)
		assert.False(t, b.Allow())
		assert.False(t, b.ReserveN(1).OK())
		assert.ErrorIs(t, b.Wait(context.Background()), limiter.ErrRefused)
	})
	t.Run("high rate is not rounded to whole ns", func(t *testing.T) {
		clk := newFakeClock()
		b, err := limiter.NewTokenBucket(3e6, 10, limiter.WithClock(clk))
		require.NoError(t, err)
		allowed := 0
		for i := range 1_000_000 { // 1 ms simulated, one attempt per ns
			if i > 0 {
				clk.Advance(time.Nanosecond)
			}
			if b.AllowN(1) {
				allowed++
			}
		}
		// 3e6/s over 1ms = 3000, plus the burst of 10. (With whole-ns
		// intervals, 333ns instead of 333.3ns, it would be 3013.)
		assert.InDelta(t, 3010, allowed, 1)
	})
}

func TestTokenBucketReserve(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	b, err := limiter.NewTokenBucket(10, 2, limiter.WithClock(clk))
	require.NoError(t, err)
	r1 := b.ReserveN(2)
	require.True(t, r1.OK())
	assert.Zero(t, r1.Delay())
	r2 := b.ReserveN(1)
	require.True(t, r2.OK())
	assert.Equal(t, 100*time.Millisecond, r2.Delay())
	r3 := b.ReserveN(2)
	require.True(t, r3.OK())
	assert.Equal(t, 300*time.Millisecond, r3.Delay())
	r3.Cancel()
	r2.Cancel()
	clk.Advance(100 * time.Millisecond)
	assert.True(t, b.Allow(), "cancelled reservations gave their tokens back")
	assert.False(t, b.ReserveN(3).OK(), "n > burst is refused")
	assert.False(t, limiter.Reservation{}.OK())
}

func TestTokenBucketWait(t *testing.T) {
	t.Parallel()
	t.Run("fails fast past the deadline and spends nothing", func(t *testing.T) {
		t.Parallel()
		// The context's deadline is real, so the clock it is compared with
		// starts at the wall clock's now (a fixed date would make the context
		// born expired once that date has passed). One token an hour and a
		// deadline a minute away keep the test independent of machine speed.
		clk := newWallFakeClock()
		b, err := limiter.NewTokenBucket(limiter.Every(time.Hour), 1, limiter.WithClock(clk))
		require.NoError(t, err)
		require.True(t, b.Allow())
		ctx, cancel := context.WithDeadline(context.Background(), clk.Now().Add(time.Minute))
		defer cancel()
		err = b.Wait(ctx)
		require.NoError(t, ctx.Err(), "the context was still live when Wait answered")
		require.ErrorIs(t, err, limiter.ErrWouldExceedDeadline)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Zero(t, clk.Waiters(), "did not wait")
		clk.Advance(time.Hour)
		assert.True(t, b.Allow(), "the failed Wait spent nothing")
	})
	t.Run("waits on the clock", func(t *testing.T) {
		t.Parallel()
		clk := newFakeClock()
		b, err := limiter.NewTokenBucket(1, 1, limiter.WithClock(clk))
		require.NoError(t, err)
		require.True(t, b.Allow())
		done := make(chan error, 1)
		go func() { done <- b.Wait(context.Background()) }()
		require.Eventually(t, func() bool { return clk.Waiters() == 1 }, 5*time.Second, time.Millisecond)
		select {
		case <-done:
			t.Fatal("returned before the clock moved")
		default:
		}
		clk.Advance(time.Second)
		require.NoError(t, <-done)
		assert.False(t, b.Allow(), "the wait spent the token")
	})
	t.Run("cancel during wait refunds", func(t *testing.T) {
		t.Parallel()
		clk := newFakeClock()
		b, err := limiter.NewTokenBucket(1, 1, limiter.WithClock(clk))
		require.NoError(t, err)
		require.True(t, b.Allow())
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- b.Wait(ctx) }()
		require.Eventually(t, func() bool { return clk.Waiters() == 1 }, 5*time.Second, time.Millisecond)
		cancel()
		require.ErrorIs(t, <-done, context.Canceled)
		clk.Advance(time.Second)
		assert.True(t, b.Allow(), "the cancelled wait gave its token back")
	})
	t.Run("bad n and done ctx", func(t *testing.T) {
		t.Parallel()
		b, err := limiter.NewTokenBucket(1, 1)
		require.NoError(t, err)
		require.ErrorIs(t, b.WaitN(context.Background(), 2), limiter.ErrInvalidArgument)
		require.ErrorIs(t, b.WaitN(context.Background(), 0), limiter.ErrInvalidArgument)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		require.ErrorIs(t, b.Wait(ctx), context.Canceled)
	})
	t.Run("real clock short wait", func(t *testing.T) {
		t.Parallel()
		b, err := limiter.NewTokenBucket(1000, 1) // 1ms per token
		require.NoError(t, err)
		for range 5 {
			require.NoError(t, b.Wait(context.Background()))
		}
	})
}

func TestTokenBucketConcurrent(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	b, err := limiter.NewTokenBucket(1, 100, limiter.WithClock(clk))
	require.NoError(t, err)
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 500 {
				if b.Allow() {
					allowed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	assert.Equal(t, int64(100), allowed.Load(), "exactly burst allowed at a frozen clock")
}

func TestCoarseClock(t *testing.T) {
	t.Parallel()
	c := limiter.NewCoarseClock(time.Millisecond)
	before := c.Now()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- c.Run(ctx) }()
	require.Eventually(t, func() bool { return c.Now().After(before) }, 5*time.Second, time.Millisecond)
	b, err := limiter.NewTokenBucket(limiter.Every(time.Hour), 2, limiter.WithClock(c))
	require.NoError(t, err)
	assert.True(t, b.Allow())
	assert.True(t, b.Allow())
	assert.False(t, b.Allow())
	done, cancelDone := context.WithCancel(context.Background())
	cancelDone() // a Run that does start returns at once
	require.Eventually(t, func() bool { return c.Run(done) != nil }, 5*time.Second, time.Millisecond,
		"a second Run while the first runs is refused")
	require.NoError(t, c.Close())
	select {
	case <-errc: // stopped, or refused because Close came first
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after Close")
	}
	require.NoError(t, c.Close(), "Close twice")
	require.Error(t, c.Run(context.Background()), "Close is final")
	a := c.Now()
	assert.False(t, c.Now().Before(a), "exact readings after Close")
	assert.False(t, b.Allow())
}

func TestCoarseClockStopsWithContext(t *testing.T) {
	t.Parallel()
	c := limiter.NewCoarseClock(0)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- c.Run(ctx) }()
	cancel()
	require.NoError(t, <-errc)
	require.NoError(t, c.Close())
}

func TestEveryPer(t *testing.T) {
	t.Parallel()
	assert.Equal(t, limiter.Limit(10), limiter.Every(100*time.Millisecond))
	assert.True(t, math.IsInf(float64(limiter.Every(0)), 1))
	assert.InDelta(t, 100.0/60, float64(limiter.Per(100, time.Minute)), 1e-9)
	assert.True(t, math.IsInf(float64(limiter.Per(1, 0)), 1))
	assert.True(t, errors.Is(limiter.ErrInvalidConfig, limiter.ErrInvalidConfig))
}
