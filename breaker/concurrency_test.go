package breaker_test

import (
	"context"
	"errors"
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

// tripped returns a breaker that is Open, with timeout 1s on clk.
func tripped(t *testing.T, clk *fakeClock, opts ...breaker.Option) *breaker.Breaker {
	t.Helper()
	b, err := breaker.New("t", append([]breaker.Option{breaker.WithClock(clk), breaker.WithConsecutiveFailures(1),
		breaker.WithOpenTimeout(time.Second)}, opts...)...)
	require.NoError(t, err)
	require.ErrorIs(t, b.Execute(context.Background(), func(context.Context) error { return errFail }), errFail)
	require.Equal(t, breaker.Open, b.State())
	return b
}

// within fails the test if f does not return in d (a deadlock guard; the
// logic under test never depends on it).
func within(t *testing.T, d time.Duration, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatal("deadlock: did not return in time")
	}
}

func TestProbeLimitWithConcurrentCallers(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	b := tripped(t, clk, breaker.WithProbeLimit(3), breaker.WithSuccessesToClose(4))
	clk.Advance(time.Second)
	ctx := context.Background()

	release := make(chan error)
	started := make(chan struct{})
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			_ = b.Execute(ctx, func(context.Context) error { started <- struct{}{}; return <-release })
		})
	}
	for range 3 {
		<-started
	}
	assert.Equal(t, 3, b.Counts().Probes)
	// Every other caller is refused while the three probes run.
	for range 10 {
		require.ErrorIs(t, b.Execute(ctx, func(context.Context) error { t.Error("ran"); return nil }), breaker.ErrTooManyProbes)
	}
	release <- context.Canceled // ignored: gives the slot back, counts nothing
	require.Eventually(t, func() bool { return b.Counts().Probes == 2 }, 5*time.Second, time.Millisecond)
	require.NoError(t, b.Execute(ctx, func(context.Context) error { return nil })) // takes the freed slot
	release <- nil
	release <- nil
	wg.Wait()
	c := b.Counts()
	assert.Equal(t, breaker.HalfOpen, c.State)
	assert.Equal(t, uint64(3), c.Successes)
	assert.Equal(t, uint64(1), c.Ignored)
	assert.Equal(t, uint64(10), c.Rejected)
	assert.Equal(t, 0, c.Probes)
	require.NoError(t, b.Execute(ctx, func(context.Context) error { return nil }))
	assert.Equal(t, breaker.Closed, b.State())
}

func TestPanickingProbeReleasesItsSlot(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	b := tripped(t, clk) // probe limit 1
	clk.Advance(time.Second)
	ctx := context.Background()

	type boom struct{ n int }
	func() {
		defer func() {
			r := recover()
			assert.Equal(t, boom{7}, r, "the original panic value continues")
		}()
		_ = b.Execute(ctx, func(context.Context) error { panic(boom{7}) })
		t.Fatal("not reached")
	}()
	c := b.Counts()
	assert.Equal(t, breaker.Open, c.State, "a panic is a failure")
	assert.Equal(t, 0, c.Probes, "the slot was given back")

	clk.Advance(time.Second)
	func() {
		defer func() { _ = recover() }()
		_, _ = breaker.Do(ctx, b, func(context.Context) (int, error) { panic("do") })
	}()
	assert.Equal(t, 0, b.Counts().Probes)

	// runtime.Goexit (t.FailNow in a helper, for instance) releases too.
	clk.Advance(time.Second)
	var wg sync.WaitGroup
	wg.Go(func() {
		_ = b.Execute(ctx, func(context.Context) error { runtime.Goexit(); return nil })
	})
	wg.Wait()
	assert.Equal(t, 0, b.Counts().Probes)
	assert.Equal(t, breaker.Open, b.State())

	// And the slot is really usable: a probe runs and closes the breaker.
	clk.Advance(time.Second)
	require.NoError(t, b.Execute(ctx, func(context.Context) error { return nil }))
	assert.Equal(t, breaker.Closed, b.State())
}

func TestPanicInClosedCountsAsFailure(t *testing.T) {
	t.Parallel()
	b, err := breaker.New("t", breaker.WithConsecutiveFailures(2), breaker.WithClock(newFakeClock()))
	require.NoError(t, err)
	for range 2 {
		func() {
			defer func() { _ = recover() }()
			_ = b.Execute(context.Background(), func(context.Context) error { panic("x") })
		}()
	}
	assert.Equal(t, breaker.Open, b.State())
}

func TestHookRunsOutsideTheLock(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	var b *breaker.Breaker
	type tr struct{ from, to breaker.State }
	var got []tr
	hook := func(_ context.Context, name string, from, to breaker.State) {
		assert.Equal(t, "db", name)
		got = append(got, tr{from, to})
		// Calling back into the breaker must not deadlock.
		_ = b.State()
		_ = b.Counts()
		if from == breaker.Open && to == breaker.HalfOpen {
			// A probe from inside the hook: it fails, which causes another
			// transition while this hook is running.
			_ = b.Execute(context.Background(), func(context.Context) error { return errFail })
		}
		done, _ := b.Allow()
		done(nil)
	}
	var err error
	b, err = breaker.New("db", breaker.WithClock(clk), breaker.WithConsecutiveFailures(1),
		breaker.WithOpenTimeout(time.Second), breaker.WithOnStateChange(hook))
	require.NoError(t, err)
	within(t, 10*time.Second, func() {
		_ = b.Execute(context.Background(), func(context.Context) error { return errFail })
		clk.Advance(time.Second)
		_ = b.State()
	})
	assert.Equal(t, []tr{
		{breaker.Closed, breaker.Open},
		{breaker.Open, breaker.HalfOpen},
		{breaker.HalfOpen, breaker.Open}, // caused inside the hook, delivered after it, in order
	}, got)
}

func TestPanickingHookDoesNotWedgeDelivery(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	var calls atomic.Int32
	b, err := breaker.New("t", breaker.WithClock(clk), breaker.WithConsecutiveFailures(1), breaker.WithOpenTimeout(time.Second),
		breaker.WithOnStateChange(func(context.Context, string, breaker.State, breaker.State) {
			if calls.Add(1) == 1 {
				panic("hook")
			}
		}))
	require.NoError(t, err)
	assert.Panics(t, func() { _ = b.Execute(context.Background(), func(context.Context) error { return errFail }) })
	assert.Equal(t, breaker.Open, b.State())
	clk.Advance(time.Second)
	assert.Equal(t, breaker.HalfOpen, b.State())
	assert.Equal(t, int32(2), calls.Load(), "later transitions are still delivered")
}

func TestHookOrderUnderConcurrency(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	var mu sync.Mutex
	var seq []breaker.State
	b, err := breaker.New("t", breaker.WithClock(clk), breaker.WithConsecutiveFailures(1), breaker.WithOpenTimeout(time.Second),
		breaker.WithProbeLimit(4), breaker.WithOnStateChange(func(_ context.Context, _ string, from, to breaker.State) {
			mu.Lock()
			if len(seq) == 0 {
				seq = append(seq, from)
			}
			seq = append(seq, to)
			mu.Unlock()
		}))
	require.NoError(t, err)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for range 2000 {
				if r.IntN(50) == 0 {
					clk.Advance(time.Second)
				}
				_ = b.Execute(context.Background(), func(context.Context) error {
					if r.IntN(2) == 0 {
						return errFail
					}
					return nil
				})
			}
		})
	}
	wg.Wait()
	_ = b.State()
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, seq)
	assert.Equal(t, breaker.Closed, seq[0])
	// Delivered in order: each hook's from is the previous hook's to, which
	// means consecutive entries of seq are always legal transitions.
	legal := map[[2]breaker.State]bool{
		{breaker.Closed, breaker.Open}: true, {breaker.Open, breaker.HalfOpen}: true,
		{breaker.HalfOpen, breaker.Open}: true, {breaker.HalfOpen, breaker.Closed}: true,
	}
	for i := 1; i < len(seq); i++ {
		require.True(t, legal[[2]breaker.State{seq[i-1], seq[i]}], "transition %d: %v -> %v", i, seq[i-1], seq[i])
	}
	assert.Equal(t, b.State(), seq[len(seq)-1])
}

func TestAllow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("done twice counts once", func(t *testing.T) {
		t.Parallel()
		b, err := breaker.New("t", breaker.WithConsecutiveFailures(2), breaker.WithClock(newFakeClock()))
		require.NoError(t, err)
		done, err := b.Allow()
		require.NoError(t, err)
		done(errFail)
		done(errFail)
		done(nil)
		c := b.Counts()
		assert.Equal(t, uint64(1), c.Failures)
		assert.Equal(t, uint32(1), c.ConsecutiveFailures)
		assert.Equal(t, breaker.Closed, c.State)
	})

	t.Run("done called concurrently counts once", func(t *testing.T) {
		t.Parallel()
		b, err := breaker.New("t", breaker.WithConsecutiveFailures(1000), breaker.WithClock(newFakeClock()))
		require.NoError(t, err)
		for range 50 {
			done, err := b.Allow()
			require.NoError(t, err)
			var wg sync.WaitGroup
			for range 4 {
				wg.Go(func() { done(errFail) })
			}
			wg.Wait()
		}
		assert.Equal(t, uint32(50), b.Counts().ConsecutiveFailures)
	})

	t.Run("refused returns a harmless done", func(t *testing.T) {
		t.Parallel()
		clk := newFakeClock()
		b := tripped(t, clk)
		done, err := b.Allow()
		require.ErrorIs(t, err, breaker.ErrOpen)
		require.NotNil(t, done)
		done(nil)
		assert.Equal(t, breaker.Open, b.State())
		clk.Advance(time.Second)
		done1, err := b.Allow()
		require.NoError(t, err)
		done2, err := b.Allow()
		require.ErrorIs(t, err, breaker.ErrTooManyProbes)
		done2(nil)
		assert.Equal(t, breaker.HalfOpen, b.State(), "a refused permit's done closes nothing")
		done1(nil)
		assert.Equal(t, breaker.Closed, b.State())
		done1(errFail)
		assert.Equal(t, breaker.Counts{State: breaker.Closed, Rejected: 2}, b.Counts())
	})

	t.Run("half-open done twice releases once", func(t *testing.T) {
		t.Parallel()
		clk := newFakeClock()
		b := tripped(t, clk, breaker.WithProbeLimit(2), breaker.WithSuccessesToClose(5))
		clk.Advance(time.Second)
		d1, err := b.Allow()
		require.NoError(t, err)
		d2, err := b.Allow()
		require.NoError(t, err)
		d1(context.Canceled)
		d1(context.Canceled)
		assert.Equal(t, 1, b.Counts().Probes, "second done must not free d2's slot")
		d2(nil)
		assert.Equal(t, 0, b.Counts().Probes)
		assert.Equal(t, uint64(1), b.Counts().Successes)
	})

	t.Run("abandoned half-open permit gives its slot back when collected", func(t *testing.T) {
		t.Parallel()
		clk := newFakeClock()
		b := tripped(t, clk)
		clk.Advance(time.Second)
		func() {
			_, err := b.Allow() // done dropped on the floor
			require.NoError(t, err)
		}()
		require.Eventually(t, func() bool {
			runtime.GC()
			return b.Counts().Probes == 0
		}, 10*time.Second, 5*time.Millisecond)
		c := b.Counts()
		assert.Equal(t, breaker.HalfOpen, c.State)
		assert.Equal(t, uint64(1), c.Ignored)
		require.NoError(t, b.Execute(ctx, func(context.Context) error { return nil }))
		assert.Equal(t, breaker.Closed, b.State())
	})
}

func TestStaleResultsAreDropped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("closed call finishing after a trip", func(t *testing.T) {
		t.Parallel()
		clk := newFakeClock()
		b, err := breaker.New("t", breaker.WithClock(clk), breaker.WithConsecutiveFailures(1), breaker.WithOpenTimeout(time.Second))
		require.NoError(t, err)
		slow, err := b.Allow() // admitted while closed
		require.NoError(t, err)
		_ = b.Execute(ctx, func(context.Context) error { return errFail }) // trips
		clk.Advance(time.Second)
		require.NoError(t, b.Execute(ctx, func(context.Context) error { return nil })) // probe closes
		slow(errFail)                                                                  // from the old closed period
		assert.Equal(t, breaker.Counts{State: breaker.Closed, Successes: 0}, b.Counts())
		assert.Equal(t, breaker.Closed, b.State())
	})

	t.Run("probe finishing after its half-open period ended", func(t *testing.T) {
		t.Parallel()
		clk := newFakeClock()
		b := tripped(t, clk, breaker.WithProbeLimit(2))
		clk.Advance(time.Second)
		slow, err := b.Allow()
		require.NoError(t, err)
		_ = b.Execute(ctx, func(context.Context) error { return errFail }) // reopens
		clk.Advance(time.Second)
		assert.Equal(t, breaker.HalfOpen, b.State())
		// The stale probe still holds a slot: only one new probe fits.
		d, err := b.Allow()
		require.NoError(t, err)
		_, err = b.Allow()
		require.ErrorIs(t, err, breaker.ErrTooManyProbes)
		slow(nil) // stale success: frees its slot, closes nothing
		assert.Equal(t, breaker.HalfOpen, b.State())
		assert.Equal(t, 1, b.Counts().Probes)
		d(nil)
		assert.Equal(t, breaker.Closed, b.State())
	})
}

// TestHalfOpenHammer runs many goroutines against a breaker that never
// closes (every probe fails, is ignored, panics or succeeds short of the
// close threshold) while the clock keeps moving, and checks by counting that
// no more than the probe limit of calls ever run at once, and that no slot
// leaks.
func TestHalfOpenHammer(t *testing.T) {
	t.Parallel()
	for _, limit := range []int{1, 3} {
		clk := newFakeClock()
		b := tripped(t, clk, breaker.WithProbeLimit(limit), breaker.WithSuccessesToClose(1<<30))
		var running, maxRunning, executed, refused atomic.Int64
		var wg sync.WaitGroup
		const goroutines, calls = 8, 3000
		for g := range goroutines {
			wg.Go(func() {
				r := rand.New(rand.NewPCG(uint64(g), uint64(limit)))
				for range calls {
					if r.IntN(20) == 0 {
						clk.Advance(time.Second)
					}
					mode := r.IntN(5)
					fn := func(context.Context) error {
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
						switch mode {
						case 0:
							return errFail
						case 1:
							return context.Canceled
						case 2:
							panic("probe")
						default:
							return nil
						}
					}
					var err error
					if mode == 4 {
						done, aerr := b.Allow()
						err = aerr
						if aerr == nil {
							done(fn(context.Background()))
						}
					} else {
						func() {
							defer func() { _ = recover() }()
							err = b.Execute(context.Background(), fn)
						}()
					}
					if errors.Is(err, breaker.ErrOpen) || errors.Is(err, breaker.ErrTooManyProbes) {
						refused.Add(1)
					}
				}
			})
		}
		wg.Wait()
		assert.LessOrEqual(t, maxRunning.Load(), int64(limit), "limit %d", limit)
		assert.Positive(t, executed.Load())
		assert.Equal(t, int64(goroutines*calls), executed.Load()+refused.Load())
		c := b.Counts()
		assert.Equal(t, 0, c.Probes, "no slot leaked")
		assert.Equal(t, uint64(refused.Load()), c.Rejected)
		assert.NotEqual(t, breaker.Closed, c.State)
		t.Logf("limit %d: executed %d, refused %d, max concurrent %d", limit, executed.Load(), refused.Load(), maxRunning.Load())
	}
}

func TestConsecutiveFailuresExactUnderConcurrency(t *testing.T) {
	t.Parallel()
	b, err := breaker.New("t", breaker.WithConsecutiveFailures(1<<30), breaker.WithClock(newFakeClock()))
	require.NoError(t, err)
	const goroutines, calls = 8, 5000
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for range calls {
				_ = b.Execute(context.Background(), func(context.Context) error { return errFail })
			}
		})
	}
	wg.Wait()
	c := b.Counts()
	assert.Equal(t, uint32(goroutines*calls), c.ConsecutiveFailures)
	assert.Equal(t, uint64(goroutines*calls), c.Failures)
	require.NoError(t, b.Execute(context.Background(), func(context.Context) error { return nil }))
	assert.Equal(t, uint32(0), b.Counts().ConsecutiveFailures)
}

func TestTripsExactlyOnceUnderConcurrency(t *testing.T) {
	t.Parallel()
	for _, window := range []bool{false, true} {
		clk := newFakeClock()
		var trips atomic.Int32
		opts := []breaker.Option{breaker.WithClock(clk), breaker.WithConsecutiveFailures(10), breaker.WithOpenTimeout(time.Hour),
			breaker.WithOnStateChange(func(_ context.Context, _ string, from, to breaker.State) {
				if to == breaker.Open {
					trips.Add(1)
				}
			})}
		if window {
			opts = append(opts, breaker.WithConsecutiveFailures(0), breaker.WithFailureRatio(0.9, 10))
		}
		b, err := breaker.New("t", opts...)
		require.NoError(t, err)
		var ran, refused atomic.Int64
		var wg sync.WaitGroup
		const goroutines, calls = 8, 500
		for range goroutines {
			wg.Go(func() {
				for range calls {
					err := b.Execute(context.Background(), func(context.Context) error { ran.Add(1); return errFail })
					if errors.Is(err, breaker.ErrOpen) {
						refused.Add(1)
					}
				}
			})
		}
		wg.Wait()
		assert.Equal(t, int32(1), trips.Load(), "window=%v", window)
		assert.Equal(t, int64(goroutines*calls), ran.Load()+refused.Load())
		assert.Equal(t, uint64(refused.Load()), b.Counts().Rejected)
		assert.GreaterOrEqual(t, ran.Load(), int64(10))
		assert.Less(t, ran.Load(), int64(10+goroutines), "at most the in-flight calls run after the trip")
	}
}

func TestClosedCountsExactUnderConcurrency(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	b, err := breaker.New("t", breaker.WithClock(clk), breaker.WithConsecutiveFailures(1<<30),
		breaker.WithFailureRatio(1, 1<<30), breaker.WithWindow(time.Hour, 8))
	require.NoError(t, err)
	const goroutines, calls = 8, 2000
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range calls {
				if g == 0 && i%100 == 0 {
					clk.Advance(time.Minute) // rotations race with writers
				}
				_ = b.Execute(context.Background(), func(context.Context) error {
					switch i % 3 {
					case 0:
						return nil
					case 1:
						return errFail
					}
					return context.Canceled
				})
			}
		})
	}
	wg.Wait()
	c := b.Counts()
	// The clock moved 20 minutes, well inside the hour window: nothing is
	// lost to rotation.
	assert.Equal(t, uint64(goroutines*calls), c.Requests())
	assert.Equal(t, uint64(goroutines*((calls+2)/3)), c.Successes)
	assert.Equal(t, uint64(goroutines*((calls+1)/3)), c.Failures)
}
