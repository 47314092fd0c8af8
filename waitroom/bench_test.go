package waitroom

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seckillkit/seckill/internal/testenv"
)

// Redis-bound benchmarks run only against a real server
// (SECKILL_REDIS_ADDR); miniredis figures are never reported.
func benchRoom(b *testing.B, c Clock) (*Room, *redis.Client) {
	b.Helper()
	rdb := testenv.RealRedis(b)
	r, err := New(rdb, testKeys, WithKeyPrefix(testenv.Prefix(b)), WithClock(c))
	if err != nil {
		b.Fatal(err)
	}
	return r, rdb
}

// anchorScript is the trivial script the anchor runs: one EVALSHA round
// trip that does nothing, the floor of any one-script operation.
var anchorScript = redis.NewScript("return 1")

// BenchmarkJoin measures Join (one script, plus signing the ticket) of
// distinct users after the start, in parallel, next to the anchor: a bare
// EVALSHA of a trivial script on the same client in the same run.
func BenchmarkJoin(b *testing.B) {
	ctx := context.Background()
	c := testenv.NewClock(t0)
	r, rdb := benchRoom(b, c)
	configure(b, r, "bench", 1000, 0)
	b.Run("join", func(b *testing.B) {
		var n atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := r.Join(ctx, "bench", "u"+strconv.FormatInt(n.Add(1), 10)); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("anchor-evalsha-return-1", func(b *testing.B) { benchAnchor(b, rdb) })
}

func benchAnchor(b *testing.B, rdb *redis.Client) {
	ctx := context.Background()
	if err := anchorScript.Load(ctx, rdb).Err(); err != nil {
		b.Fatal(err)
	}
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := anchorScript.Run(ctx, rdb, []string{"{anchor}"}).Err(); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkAdmit measures Admit calls that each admit one user (the clock
// moves one allowance step per call), in parallel, next to the anchor.
func BenchmarkAdmit(b *testing.B) {
	ctx := context.Background()
	c := testenv.NewClock(t0)
	r, rdb := benchRoom(b, c)
	b.Run("admit-1", func(b *testing.B) {
		sale := fmt.Sprintf("admit%d", b.N)
		configure(b, r, sale, 1000, 0)
		pipe := rdb.Pipeline()
		k := newRoomKeys(r.opts.prefix, sale)
		for i := range b.N + 1 {
			joinScript.Run(ctx, pipe, []string{k.meta, k.ent, k.q}, "u"+strconv.Itoa(i), c.Now().UnixMilli())
			if pipe.Len() == 1000 {
				if _, err := pipe.Exec(ctx); err != nil {
					b.Fatal(err)
				}
			}
		}
		if _, err := pipe.Exec(ctx); err != nil {
			b.Fatal(err)
		}
		if err := r.Start(ctx, sale, testSeed); err != nil {
			b.Fatal(err)
		}
		r.Admit(ctx, sale, 1)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				c.Add(time.Millisecond) // one user's allowance at 1,000/s
				if _, err := r.Admit(ctx, sale, 1); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("anchor-evalsha-return-1", func(b *testing.B) { benchAnchor(b, rdb) })
}

// BenchmarkMemoryPerWaitingUser joins 100,000 users (IDs "u0".."u99999",
// 2–6 bytes; a snowflake ID adds its extra length) and reports Redis
// MEMORY USAGE (exact, SAMPLES 0) of the room's keys per waiting user:
// "pre" for a placed pre-queue (entry hash + pq list), "fifo" for entries
// that joined after the start (entry hash + q list).
func BenchmarkMemoryPerWaitingUser(b *testing.B) {
	n := 100_000 // SECKILL_WAITROOM_MEMORY_N=1000000 for the million
	if v, err := strconv.Atoi(os.Getenv("SECKILL_WAITROOM_MEMORY_N")); err == nil && v > 0 {
		n = v
	}
	ctx := context.Background()
	c := testenv.NewClock(t0.Add(-time.Hour))
	r, rdb := benchRoom(b, c)
	fill := func(sale string) roomKeys {
		k := newRoomKeys(r.opts.prefix, sale)
		pipe := rdb.Pipeline()
		for i := range n {
			joinScript.Run(ctx, pipe, []string{k.meta, k.ent, k.q}, "u"+strconv.Itoa(i), c.Now().UnixMilli())
			if pipe.Len() == 1000 {
				if _, err := pipe.Exec(ctx); err != nil {
					b.Fatal(err)
				}
			}
		}
		if _, err := pipe.Exec(ctx); err != nil {
			b.Fatal(err)
		}
		return k
	}
	var pre, fifo float64
	for i := 0; b.Loop(); i++ {
		c.Set(t0.Add(-time.Hour))
		s1, s2 := fmt.Sprintf("pre%d", i), fmt.Sprintf("fifo%d", i)
		configure(b, r, s1, 100, 0)
		configure(b, r, s2, 100, 0)
		k1 := fill(s1)
		c.Set(t0)
		if err := r.Start(ctx, s1, testSeed); err != nil {
			b.Fatal(err)
		}
		k2 := fill(s2)
		mem := func(k roomKeys) float64 {
			var sum int64
			for _, key := range []string{k.meta, k.ent, k.pq, k.q, k.adm} {
				sum += rdb.MemoryUsage(ctx, key, 0).Val()
			}
			return float64(sum) / float64(n)
		}
		pre, fifo = mem(k1), mem(k2)
		rdb.Unlink(ctx, k1.meta, k1.ent, k1.pq, k1.q, k1.adm)
		rdb.Unlink(ctx, k2.meta, k2.ent, k2.pq, k2.q, k2.adm)
	}
	b.ReportMetric(pre, "B/user-pre")
	b.ReportMetric(fifo, "B/user-fifo")
}

// callers is how many goroutines the redis-benchmark comparison runs
// (testdata/bench.sh: redis-benchmark -c 50 on the same scripts).
const callers = 50

// parallel runs body on callers goroutines (b.SetParallelism rounds up to
// a multiple of GOMAXPROCS).
func parallel(b *testing.B, body func(pb *testing.PB)) {
	p := runtime.GOMAXPROCS(0)
	b.SetParallelism((callers + p - 1) / p)
	b.RunParallel(body)
}

// BenchmarkJoin50 is Join of distinct users after the start on 50
// goroutines, the real clock (the script is handed the time, as in
// production), against a real Redis: testdata/bench.sh runs it between
// redis-benchmark runs of the same join.lua (-c 50). "script" is the bare
// script through go-redis EVALSHA (no ticket signed): the client's share.
func BenchmarkJoin50(b *testing.B) {
	ctx := context.Background()
	rdb := testenv.RealRedis(b)
	r, err := New(rdb, testKeys, WithKeyPrefix(testenv.Prefix(b)))
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now().Add(-time.Hour)
	if err := r.Configure(ctx, "bench", Config{Start: start, Commitment: Commit(testSeed), Rate: 1000}); err != nil {
		b.Fatal(err)
	}
	var n atomic.Int64
	b.Run("join", func(b *testing.B) {
		parallel(b, func(pb *testing.PB) {
			for pb.Next() {
				if _, err := r.Join(ctx, "bench", "u"+strconv.FormatInt(n.Add(1), 10)); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	k := newRoomKeys(r.opts.prefix, "bench")
	b.Run("script", func(b *testing.B) {
		parallel(b, func(pb *testing.PB) {
			for pb.Next() {
				if err := joinScript.Run(ctx, rdb, []string{k.meta, k.ent, k.q}, "u"+strconv.FormatInt(n.Add(1), 10), 0).Err(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// BenchmarkAdmit50 is Admit of one user a call on 50 goroutines, the real
// clock, a rate no call waits for (10^9/s), from a queue filled before
// the timer: the same work as testdata/bench.sh's redis-benchmark run of
// admit.lua (max 1).
func BenchmarkAdmit50(b *testing.B) {
	ctx := context.Background()
	rdb := testenv.RealRedis(b)
	r, err := New(rdb, testKeys, WithKeyPrefix(testenv.Prefix(b)))
	if err != nil {
		b.Fatal(err)
	}
	sale := fmt.Sprintf("admit%d", b.N)
	if err := r.Configure(ctx, sale, Config{Start: time.Now().Add(-time.Hour), Commitment: Commit(testSeed), Rate: 1e9}); err != nil {
		b.Fatal(err)
	}
	k := newRoomKeys(r.opts.prefix, sale)
	pipe := rdb.Pipeline()
	for i := range b.N + callers {
		joinScript.Run(ctx, pipe, []string{k.meta, k.ent, k.q}, "u"+strconv.Itoa(i), 0)
		if pipe.Len() == 1000 {
			if _, err := pipe.Exec(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	parallel(b, func(pb *testing.PB) {
		for pb.Next() {
			if _, err := r.Admit(ctx, sale, 1); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
