package breaker_test

import (
	"context"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckillkit/seckill/breaker"
)

// With the default (process) clock, the end of the open period is signalled
// by a runtime timer instead of a clock reading per refused call. These tests
// cover that path with short real timeouts; the state logic itself is covered
// with a fake clock elsewhere.

func TestOpenTimeoutWithProcessClock(t *testing.T) {
	t.Parallel()
	const timeout = 50 * time.Millisecond
	var hooks atomic.Int32
	b, err := breaker.New("t", breaker.WithConsecutiveFailures(1), breaker.WithOpenTimeout(timeout),
		breaker.WithOnStateChange(func(context.Context, string, breaker.State, breaker.State) { hooks.Add(1) }))
	require.NoError(t, err)
	start := time.Now()
	_ = b.Execute(context.Background(), func(context.Context) error { return errFail })
	err = b.Execute(context.Background(), func(context.Context) error { return nil })
	if time.Since(start) < timeout { // only meaningful if this goroutine was not stalled
		require.ErrorIs(t, err, breaker.ErrOpen)
	}
	require.Eventually(t, func() bool { return b.State() == breaker.HalfOpen }, 10*time.Second, time.Millisecond)
	assert.GreaterOrEqual(t, time.Since(start), timeout, "never early")
	require.NoError(t, b.Execute(context.Background(), func(context.Context) error { return nil }))
	assert.Equal(t, breaker.Closed, b.State())
	assert.Equal(t, int32(3), hooks.Load())

	// A second trip arms a new timer: an old one can't end the new period.
	_ = b.Execute(context.Background(), func(context.Context) error { return errFail })
	require.Eventually(t, func() bool { return b.State() == breaker.HalfOpen }, 10*time.Second, time.Millisecond)
}

func TestHalfOpenHammerWithProcessClock(t *testing.T) {
	t.Parallel()
	const limit = 2
	b, err := breaker.New("t", breaker.WithConsecutiveFailures(1), breaker.WithOpenTimeout(20*time.Microsecond),
		breaker.WithProbeLimit(limit), breaker.WithSuccessesToClose(1<<30))
	require.NoError(t, err)
	_ = b.Execute(context.Background(), func(context.Context) error { return errFail })
	var running, maxRunning, executed atomic.Int64
	var wg sync.WaitGroup
	deadline := time.Now().Add(5 * time.Second) // bounds the loop if timers are slow under load
	for g := range 4 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 9))
			for executed.Load() < 2000 && time.Now().Before(deadline) {
				mode := r.IntN(3)
				_ = b.Execute(context.Background(), func(context.Context) error {
					n := running.Add(1)
					for {
						m := maxRunning.Load()
						if n <= m || maxRunning.CompareAndSwap(m, n) {
							break
						}
					}
					executed.Add(1)
					runtime.Gosched()
					running.Add(-1)
					if mode == 0 {
						return errFail
					}
					if mode == 1 {
						return context.Canceled
					}
					return nil
				})
				runtime.Gosched() // let the timer goroutine run on a loaded machine
			}
		})
	}
	wg.Wait()
	assert.LessOrEqual(t, maxRunning.Load(), int64(limit))
	assert.Positive(t, executed.Load())
	assert.Equal(t, 0, b.Counts().Probes)
	assert.NotEqual(t, breaker.Closed, b.State())
}

// TestWindowWithProcessClock drives the cached-epoch path: successes use the
// epoch cached until the boundary timer fires.
func TestWindowWithProcessClock(t *testing.T) {
	t.Parallel()
	const window = 200 * time.Millisecond
	b, err := breaker.New("t", breaker.WithConsecutiveFailures(1<<30), breaker.WithWindow(window, 4))
	require.NoError(t, err)
	ctx := context.Background()
	ok := func(context.Context) error { return nil }

	start := time.Now()
	for range 50 {
		require.NoError(t, b.Execute(ctx, ok))
	}
	c := b.Counts()
	if time.Since(start) < window/4 { // not stalled past the first bucket
		assert.Equal(t, uint64(50), c.Successes)
	}
	assert.LessOrEqual(t, c.Successes, uint64(50))
	// The successes leave with their bucket; a later success lands in a fresh
	// bucket (the boundary timer re-armed after the cache went stale).
	require.Eventually(t, func() bool { return b.Counts().Successes == 0 }, 10*time.Second, 5*time.Millisecond)
	again := time.Now()
	require.NoError(t, b.Execute(ctx, ok))
	_ = b.Execute(ctx, func(context.Context) error { return errFail })
	c = b.Counts()
	if time.Since(again) < window/4 { // not stalled past a bucket
		assert.Equal(t, uint64(1), c.Successes)
		assert.Equal(t, uint64(1), c.Failures)
	}
	assert.LessOrEqual(t, c.Successes+c.Failures, uint64(2))
}

func TestWindowHammerWithProcessClock(t *testing.T) {
	t.Parallel()
	// Tiny buckets so that boundaries, timers, rotations and cached-epoch
	// writes race constantly; checked with -race and by counting.
	b, err := breaker.New("t", breaker.WithConsecutiveFailures(1<<30), breaker.WithWindow(time.Hour, 4))
	require.NoError(t, err)
	tiny, err := breaker.New("t", breaker.WithConsecutiveFailures(1<<30), breaker.WithWindow(400*time.Microsecond, 4))
	require.NoError(t, err)
	const goroutines, calls = 4, 5000
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range calls {
				var err error
				if (i+g)%7 == 0 {
					err = errFail
				}
				_ = b.Execute(context.Background(), func(context.Context) error { return err })
				_ = tiny.Execute(context.Background(), func(context.Context) error { return err })
				if i%500 == 0 {
					_ = tiny.Counts()
				}
			}
		})
	}
	wg.Wait()
	c := b.Counts()
	assert.Equal(t, uint64(goroutines*calls), c.Requests(), "an hour-long window loses nothing")
	assert.LessOrEqual(t, tiny.Counts().Requests(), uint64(goroutines*calls))
}
