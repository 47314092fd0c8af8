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
		breaker.WithOnStateChange(func(string, breaker.State, breaker.State) { hooks.Add(1) }))
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
