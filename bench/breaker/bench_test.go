// Package breaker_test holds the benchmarks of
// github.com/seckillkit/seckill/breaker that run sony/gobreaker/v2 side by
// side in the same `go test -bench` run:
//
//	cd bench && flock /tmp/seckill-bench.lock go test -run '^$' -bench . -benchmem -count 5 ./breaker/
//
// Configurations compared:
//   - Consecutive: the defaults of both libraries (trip on consecutive
//     failures, no rolling window).
//   - Window: a 10s rolling window of 10 buckets with a 50% failure-ratio
//     trip over at least 20 requests (gobreaker: Interval 10s, BucketPeriod
//     1s and an equivalent ReadyToTrip).
//   - OpenReject: the breaker is open with a long timeout; every call is
//     refused.
//   - MutexReference: the closed-state path of the breaker package written
//     with one sync.Mutex instead of atomics, to show what the atomics buy
//     (docs/ARCHITECTURE.md, "Concurrency: mutex first"); compare it with
//     Execute/Consecutive/*/seckill of the same run.
package breaker_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/seckillkit/seckill/breaker"
	"github.com/sony/gobreaker/v2"
)

var errBench = errors.New("bench: failure")

func okFn(context.Context) error   { return nil }
func failFn(context.Context) error { return errBench }
func okGo() (struct{}, error)      { return struct{}{}, nil }
func failGo() (struct{}, error)    { return struct{}{}, errBench }
func gobreakerRatio(c gobreaker.Counts) bool {
	return c.Requests >= 20 && c.TotalFailures*2 >= c.Requests
}

func newOurs(b *testing.B, window bool) *breaker.Breaker {
	var opts []breaker.Option
	if window {
		opts = append(opts, breaker.WithWindow(10*time.Second, 10), breaker.WithFailureRatio(0.5, 20))
	}
	br, err := breaker.New("bench", opts...)
	if err != nil {
		b.Fatal(err)
	}
	return br
}

func newGo(window bool) *gobreaker.CircuitBreaker[struct{}] {
	st := gobreaker.Settings{Name: "bench"}
	if window {
		st.Interval, st.BucketPeriod, st.ReadyToTrip = 10*time.Second, time.Second, gobreakerRatio
	}
	return gobreaker.NewCircuitBreaker[struct{}](st)
}

func BenchmarkExecute(b *testing.B) {
	for _, cfg := range []struct {
		name   string
		window bool
	}{{"Consecutive", false}, {"Window", true}} {
		b.Run(cfg.name+"/Serial/seckill", func(b *testing.B) {
			br := newOurs(b, cfg.window)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if err := br.Execute(ctx, okFn); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(cfg.name+"/Serial/gobreaker", func(b *testing.B) {
			cb := newGo(cfg.window)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := cb.Execute(okGo); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(cfg.name+"/Parallel/seckill", func(b *testing.B) {
			br := newOurs(b, cfg.window)
			ctx := context.Background()
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := br.Execute(ctx, okFn); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
		b.Run(cfg.name+"/Parallel/gobreaker", func(b *testing.B) {
			cb := newGo(cfg.window)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := cb.Execute(okGo); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkExecuteMixed alternates success and failure (never reaching the
// trip threshold), which exercises the consecutive-failure CAS path.
func BenchmarkExecuteMixed(b *testing.B) {
	b.Run("Parallel/seckill", func(b *testing.B) {
		br := newOurs(b, false)
		ctx := context.Background()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				i++
				if i&1 == 0 {
					_ = br.Execute(ctx, failFn)
				} else {
					_ = br.Execute(ctx, okFn)
				}
			}
		})
	})
	b.Run("Parallel/gobreaker", func(b *testing.B) {
		cb := newGo(false)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				i++
				if i&1 == 0 {
					_, _ = cb.Execute(failGo)
				} else {
					_, _ = cb.Execute(okGo)
				}
			}
		})
	})
}

func BenchmarkAllow(b *testing.B) {
	b.Run("seckill", func(b *testing.B) {
		br := newOurs(b, false)
		b.ReportAllocs()
		for b.Loop() {
			done, err := br.Allow()
			if err != nil {
				b.Fatal(err)
			}
			done(nil)
		}
	})
	b.Run("gobreaker", func(b *testing.B) {
		cb := gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{Name: "bench"})
		b.ReportAllocs()
		for b.Loop() {
			done, err := cb.Allow()
			if err != nil {
				b.Fatal(err)
			}
			done(nil)
		}
	})
}

func BenchmarkOpenReject(b *testing.B) {
	ctx := context.Background()
	ours := func(b *testing.B) *breaker.Breaker {
		br, err := breaker.New("bench", breaker.WithConsecutiveFailures(1), breaker.WithOpenTimeout(time.Hour))
		if err != nil {
			b.Fatal(err)
		}
		_ = br.Execute(ctx, failFn)
		if br.State() != breaker.Open {
			b.Fatal("not open")
		}
		return br
	}
	theirs := func(b *testing.B) *gobreaker.CircuitBreaker[struct{}] {
		cb := gobreaker.NewCircuitBreaker[struct{}](gobreaker.Settings{
			Name: "bench", Timeout: time.Hour,
			ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= 1 },
		})
		_, _ = cb.Execute(failGo)
		if cb.State() != gobreaker.StateOpen {
			b.Fatal("not open")
		}
		return cb
	}
	b.Run("Serial/seckill", func(b *testing.B) {
		br := ours(b)
		b.ReportAllocs()
		for b.Loop() {
			if err := br.Execute(ctx, okFn); err != breaker.ErrOpen {
				b.Fatal(err)
			}
		}
	})
	b.Run("Serial/gobreaker", func(b *testing.B) {
		cb := theirs(b)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := cb.Execute(okGo); err != gobreaker.ErrOpenState {
				b.Fatal(err)
			}
		}
	})
	b.Run("Parallel/seckill", func(b *testing.B) {
		br := ours(b)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				_ = br.Execute(ctx, okFn)
			}
		})
	})
	b.Run("Parallel/gobreaker", func(b *testing.B) {
		cb := theirs(b)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				_, _ = cb.Execute(okGo)
			}
		})
	})
}

// mutexBreaker is the closed-state path of breaker.Breaker written the way
// docs/ARCHITECTURE.md ("Concurrency: mutex first") says to start: the same
// steps (state and generation check at
// admission and at the end, panic accounting through a defer, classification,
// a success/failure bucket and the consecutive-failure run, trip check) under
// one sync.Mutex instead of atomics. It exists only to measure what the
// lock-free fast path buys.
type mutexBreaker struct {
	mu                  sync.Mutex
	gen                 uint64
	open                bool
	consec              uint32
	successes, failures uint64
	ignored, maxConsec  uint64
	classify            func(error) breaker.Outcome
}

func (m *mutexBreaker) execute(ctx context.Context, fn func(context.Context) error) error {
	m.mu.Lock()
	if m.open {
		m.mu.Unlock()
		return breaker.ErrOpen
	}
	gen := m.gen
	m.mu.Unlock()
	finished := false
	defer func() {
		if !finished {
			m.record(gen, breaker.Failure)
		}
	}()
	err := fn(ctx)
	finished = true
	o := breaker.Success
	if err != nil {
		o = m.classify(err)
	}
	m.record(gen, o)
	return err
}

func (m *mutexBreaker) record(gen uint64, o breaker.Outcome) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.gen != gen {
		return
	}
	switch o {
	case breaker.Success:
		m.successes++
		m.consec = 0
	case breaker.Failure:
		m.failures++
		m.consec++
		if uint64(m.consec) >= m.maxConsec {
			m.open = true
			m.gen++
		}
	default:
		m.ignored++
	}
}

func BenchmarkMutexReference(b *testing.B) {
	ctx := context.Background()
	b.Run("Serial", func(b *testing.B) {
		m := &mutexBreaker{maxConsec: 5, classify: breaker.DefaultClassifier}
		b.ReportAllocs()
		for b.Loop() {
			_ = m.execute(ctx, okFn)
		}
	})
	b.Run("Parallel", func(b *testing.B) {
		m := &mutexBreaker{maxConsec: 5, classify: breaker.DefaultClassifier}
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				_ = m.execute(ctx, okFn)
			}
		})
	})
}
