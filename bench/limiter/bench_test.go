// Package limiter_test holds the benchmarks of
// github.com/seckillkit/seckill/limiter and its Redis limiters
// (limiter/redislimit) that run an anchor side by side in
// the same `go test -bench` run: BenchmarkTokenBucket against
// golang.org/x/time/rate, BenchmarkSlidingWindow against
// github.com/go-redis/redis_rate/v10 on the real Redis named by
// SECKILL_REDIS_ADDR (skipped otherwise):
//
//	cd bench && flock /tmp/seckill-bench.lock go test -run '^$' -bench 'TokenBucket' -benchmem -count 5 ./limiter/
//	cd bench && flock /tmp/seckill-bench.lock go test -run '^$' -bench 'SlidingWindow' -benchtime 3s -benchmem -count 5 ./limiter/
package limiter_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	"golang.org/x/time/rate"

	"github.com/seckillkit/seckill/limiter"
	"github.com/seckillkit/seckill/limiter/redislimit"
)

// The bucket is sized so that the benchmark exercises the allowed path
// most of the time and the refused path the rest, like x/time/rate's own
// benchmark: 1e8 events/s with a large burst.
const (
	benchRate  = 1e8
	benchBurst = 1 << 20
)

func BenchmarkTokenBucket(b *testing.B) {
	b.Run("impl=xtimerate/mode=serial", func(b *testing.B) {
		l := rate.NewLimiter(benchRate, benchBurst)
		b.ReportAllocs()
		for b.Loop() {
			l.Allow()
		}
	})
	b.Run("impl=xtimerate/mode=parallel", func(b *testing.B) {
		l := rate.NewLimiter(benchRate, benchBurst)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				l.Allow()
			}
		})
	})
	b.Run("impl=seckill/mode=serial", func(b *testing.B) {
		l, err := limiter.NewTokenBucket(benchRate, benchBurst)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			l.Allow()
		}
	})
	b.Run("impl=seckill/mode=parallel", func(b *testing.B) {
		l, err := limiter.NewTokenBucket(benchRate, benchBurst)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				l.Allow()
			}
		})
	})
	// The same GCRA arithmetic behind a mutex, to show what the single
	// compare-and-swap buys (same clock read as impl=seckill).
	b.Run("impl=mutex-gcra/mode=serial", func(b *testing.B) {
		l := newMutexGCRA(benchRate, benchBurst)
		b.ReportAllocs()
		for b.Loop() {
			l.allow()
		}
	})
	b.Run("impl=mutex-gcra/mode=parallel", func(b *testing.B) {
		l := newMutexGCRA(benchRate, benchBurst)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				l.allow()
			}
		})
	})
	coarse := func(b *testing.B) *limiter.TokenBucket {
		c := limiter.NewCoarseClock(time.Millisecond)
		ctx, cancel := context.WithCancel(context.Background())
		go func() { _ = c.Run(ctx) }()
		b.Cleanup(func() { cancel(); _ = c.Close() })
		l, err := limiter.NewTokenBucket(benchRate, benchBurst, limiter.WithClock(c))
		if err != nil {
			b.Fatal(err)
		}
		return l
	}
	b.Run("impl=seckill-coarse/mode=serial", func(b *testing.B) {
		l := coarse(b)
		b.ReportAllocs()
		for b.Loop() {
			l.Allow()
		}
	})
	b.Run("impl=seckill-coarse/mode=parallel", func(b *testing.B) {
		l := coarse(b)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				l.Allow()
			}
		})
	})
}

// BenchmarkSlidingWindow compares redislimit.SlidingWindow.AllowN with redis_rate/v10
// Allow on the real Redis named by SECKILL_REDIS_ADDR (skipped otherwise):
// 50 parallel callers, each request for a distinct user key drawn from
// 100k users, both limiters on the same server in the same run.
func BenchmarkSlidingWindow(b *testing.B) {
	addr := os.Getenv("SECKILL_REDIS_ADDR")
	if addr == "" {
		b.Skip("SECKILL_REDIS_ADDR not set: Redis benchmarks need a real server")
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 64})
	b.Cleanup(func() { _ = rdb.Close() })
	prefix := fmt.Sprintf("bench%d:", time.Now().UnixNano())
	b.Cleanup(func() { cleanBench(rdb, prefix) })
	const users = 100_000
	keys := make([]string, users)
	for i := range keys {
		keys[i] = "u" + strconv.Itoa(i)
	}
	run := func(b *testing.B, allow func(ctx context.Context, key string) error) {
		var seq atomic.Uint64
		b.SetParallelism(25) // 25 × GOMAXPROCS(2) = 50 callers
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			ctx := context.Background()
			for pb.Next() {
				if err := allow(ctx, keys[seq.Add(1)%users]); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
	}
	b.Run("impl=redis_rate", func(b *testing.B) {
		l := redis_rate.NewLimiter(rdb)
		lim := redis_rate.PerSecond(10)
		run(b, func(ctx context.Context, key string) error {
			_, err := l.Allow(ctx, prefix+key, lim)
			return err
		})
	})
	b.Run("impl=seckill", func(b *testing.B) {
		l, err := redislimit.NewSlidingWindow(rdb, 10, time.Second, redislimit.WithKeyPrefix(prefix))
		if err != nil {
			b.Fatal(err)
		}
		run(b, func(ctx context.Context, key string) error {
			_, err := l.AllowN(ctx, key, 1)
			return err
		})
	})
	b.Run("impl=seckill-unbatched", func(b *testing.B) {
		l, err := redislimit.NewSlidingWindow(rdb, 10, time.Second, redislimit.WithKeyPrefix(prefix),
			redislimit.WithName("unbatched"), redislimit.WithBatching(0))
		if err != nil {
			b.Fatal(err)
		}
		run(b, func(ctx context.Context, key string) error {
			_, err := l.AllowN(ctx, key, 1)
			return err
		})
	})
	b.Run("impl=seckill-redisbucket", func(b *testing.B) {
		l, err := redislimit.NewBucket(rdb, 10, 10, redislimit.WithKeyPrefix(prefix))
		if err != nil {
			b.Fatal(err)
		}
		run(b, func(ctx context.Context, key string) error {
			_, err := l.AllowN(ctx, key, 1)
			return err
		})
	})
}

func cleanBench(rdb *redis.Client, prefix string) {
	ctx := context.Background()
	iter := rdb.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		rdb.Del(ctx, iter.Val())
	}
	// redis_rate keys are "rate:" + our key.
	iter = rdb.Scan(ctx, 0, "rate:"+prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		rdb.Del(ctx, iter.Val())
	}
}

type mutexGCRA struct {
	mu       sync.Mutex
	start    time.Time
	tat      int64
	interval int64
	tau      int64
}

func newMutexGCRA(rate float64, burst int) *mutexGCRA {
	iv := int64(float64(time.Second) / rate)
	return &mutexGCRA{start: time.Now(), interval: iv, tau: iv * int64(burst), tat: -1 << 60}
}

func (m *mutexGCRA) allow() bool {
	now := int64(time.Since(m.start))
	m.mu.Lock()
	defer m.mu.Unlock()
	nt := max(m.tat, now) + m.interval
	if nt-now > m.tau {
		return false
	}
	m.tat = nt
	return true
}
