// Package stock_test holds the benchmark of
// github.com/seckillkit/seckill/stock that is calibrated by an anchor
// library in the same `go test -bench` run: the in-process sold-out refusal
// (BenchmarkSoldOutLocal) next to x/time/rate Allow and time.Now
// (BenchmarkLocalAnchors):
//
//	cd bench && flock /tmp/seckill-bench.lock go test -run '^$' -bench 'SoldOutLocal|LocalAnchors' -benchmem -count 3 ./stock/
//
// The Redis-bound benchmarks of stock, whose anchor is redis-benchmark
// running the same script (stock/testdata/bench.sh), stay in the package.
package stock_test

import (
	"context"
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/seckillkit/seckill/stock"
)

// countingClock is the system clock, counting its readings.
type countingClock struct{ reads atomic.Int64 }

func (c *countingClock) Now() time.Time {
	c.reads.Add(1)
	return time.Now()
}

// startRun starts d.Run and returns once it is active, and a func that
// stops it. A second Run answers stock.ErrRunning only while one is active,
// so the loop probes with a Run on a cancelled context: if none was active
// the probe runs itself and returns nil at once, and if it displaced the
// started Run (which then returns ErrRunning) that one is started again.
func startRun(b *testing.B, d *stock.Deductor) (stop func()) {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	start := func() { go func() { done <- d.Run(ctx) }() }
	start()
	probe, cancelProbe := context.WithCancel(context.Background())
	cancelProbe()
	for {
		err := d.Run(probe)
		if errors.Is(err, stock.ErrRunning) {
			break
		}
		if err != nil {
			cancel()
			b.Fatalf("probe Run: %v", err)
		}
		select {
		case err := <-done:
			if !errors.Is(err, stock.ErrRunning) {
				cancel()
				b.Fatalf("Run returned %v before it was stopped", err)
			}
			start()
		default:
		}
		runtime.Gosched()
	}
	return func() {
		cancel()
		if err := <-done; err != nil {
			b.Errorf("Run: %v", err)
		}
	}
}

// BenchmarkSoldOutLocal: the in-process refusal once the process knows the
// activity is sold out. No Redis call; target <= 50 ns/op, 0 allocs/op.
//
//   - run: Run is active, so the flag is plain (one atomic load); the
//     benchmark checks that no refusal read the clock.
//   - clock: no Run, the flag carries a deadline checked on the Clock
//     (system clock: one time.Now per refusal).
func BenchmarkSoldOutLocal(b *testing.B) {
	for _, withRun := range []bool{true, false} {
		name := "clock"
		if withRun {
			name = "run"
		}
		b.Run(name, func(b *testing.B) {
			rdb, _ := testenv.Miniredis(b)
			opts := []stock.DeductorOption{stock.WithKeyPrefix("b:"), stock.WithRecheckInterval(time.Hour)}
			clock := &countingClock{}
			if withRun {
				opts = append(opts, stock.WithClock(clock))
			}
			d, err := stock.New(rdb, opts...)
			if err != nil {
				b.Fatal(err)
			}
			if withRun {
				b.Cleanup(startRun(b, d))
			}
			ctx := context.Background()
			if _, err := d.Load(ctx, stock.Activity{ID: "1", Stock: 0}); err != nil {
				b.Fatal(err)
			}
			req := stock.Request{Activity: "1", User: "1", Qty: 1, ReservationID: "r"}
			if res, err := d.Reserve(ctx, req); err != nil || res.Status != stock.SoldOut || !d.SoldOut("1") {
				b.Fatalf("setup: %+v %v", res, err)
			}
			reads := clock.reads.Load()
			b.Run("serial", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					res, _ := d.Reserve(ctx, req)
					if !res.Local {
						b.Fatal("reached Redis")
					}
				}
			})
			b.Run("parallel", func(b *testing.B) {
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						res, _ := d.Reserve(ctx, req)
						if !res.Local {
							b.Error("reached Redis")
							return
						}
					}
				})
			})
			if n := clock.reads.Load() - reads; withRun && n != 0 {
				b.Errorf("with Run active the refusals read the clock %d times, want 0", n)
			}
		})
	}
}

// BenchmarkLocalAnchors measures, in the same run, the anchors that
// calibrate BenchmarkSoldOutLocal on a shared machine (see BENCHMARKS.md):
// x/time/rate Allow (72 ns serial on a quiet 2-vCPU machine) and time.Now
// (42 ns).
func BenchmarkLocalAnchors(b *testing.B) {
	b.Run("rate-allow", func(b *testing.B) {
		l := rate.NewLimiter(1e9, 1e9)
		b.ReportAllocs()
		for b.Loop() {
			l.Allow()
		}
	})
	b.Run("time-now", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = time.Now()
		}
	})
}
