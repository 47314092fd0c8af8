package token

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckillkit/seckill/internal/keyring"
	"github.com/seckillkit/seckill/internal/testenv"
)

// BenchmarkVerify measures signed-URL verification in process (no replay
// guard), next to its anchors: a naive HMAC-SHA256 of the same bytes with a
// fresh hmac.New per call, and time.Now (the clock read Verify does).
func BenchmarkVerify(b *testing.B) {
	clk := clockFunc(func() time.Time { return start })
	s, err := NewSigner([]Key{k1}, WithClock(clk))
	if err != nil {
		b.Fatal(err)
	}
	tok, err := s.Sign(SignParams{Activity: "1001", User: "user-123456", Start: start})
	if err != nil {
		b.Fatal(err)
	}
	sys, err := NewSigner([]Key{k1}) // system clock: includes the real time.Now cost
	if err != nil {
		b.Fatal(err)
	}
	sysTok, err := sys.Sign(SignParams{Activity: "1001", User: "user-123456", Start: time.Now()})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	run := func(s *Signer, tok string) func(b *testing.B) {
		return func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.Verify(ctx, VerifyParams{Token: tok, Activity: "1001", User: "user-123456"}); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	b.Run("fixed-clock", run(s, tok))
	b.Run("system-clock", run(sys, sysTok))
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := s.Verify(ctx, VerifyParams{Token: tok, Activity: "1001", User: "user-123456"}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("forged", func(b *testing.B) {
		bad := []byte(tok)
		bad[len(bad)-3] ^= 1
		forged := string(bad)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := s.Verify(ctx, VerifyParams{Token: forged, Activity: "1001", User: "user-123456"}); err != ErrInvalidSignature {
				b.Fatal(err)
			}
		}
	})
	msg := make([]byte, 66) // the signed part of tok is 66 bytes
	b.Run("anchor-hmac-new", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			h := hmac.New(sha256.New, k1.Secret)
			h.Write(msg)
			_ = h.Sum(nil)
		}
	})
	b.Run("anchor-time-now", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = time.Now()
		}
	})
}

// BenchmarkSign measures signing (crypto/rand nonce + HMAC + encoding).
func BenchmarkSign(b *testing.B) {
	s, err := NewSigner([]Key{k1}, WithClock(clockFunc(func() time.Time { return start })))
	if err != nil {
		b.Fatal(err)
	}
	p := SignParams{Activity: "1001", User: "user-123456", Start: start}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Sign(p); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTake measures take-and-bind against the real Redis named by
// SECKILL_REDIS_ADDR (skipped otherwise) with 50 parallel callers, each op
// a distinct user, on a pool issued large enough that every op is Granted.
// Compare with testdata/redis-benchmark.sh (same script via EVALSHA, -c 50).
func BenchmarkTake(b *testing.B) {
	rdb := testenv.RealRedis(b)
	ctx := context.Background()
	p, err := NewPool(rdb, WithKeyPrefix(testenv.Prefix(b)), WithMultiplier(1), WithIssueBatch(5000))
	if err != nil {
		b.Fatal(err)
	}
	activity := fmt.Sprint("bench-", time.Now().UnixNano())
	if _, err := p.Issue(ctx, activity, int64(b.N)+100); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = p.Drop(context.Background(), activity) })
	var seq atomic.Int64
	var notGranted atomic.Int64
	b.SetParallelism(25) // 25 × GOMAXPROCS(2) = 50 callers
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			g, err := p.Take(ctx, activity, fmt.Sprint("u", seq.Add(1)))
			if err != nil {
				b.Error(err)
				return
			}
			if g.Status != Granted {
				notGranted.Add(1)
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "takes/s")
	if n := notGranted.Load(); n > 0 {
		b.Fatalf("%d takes not granted", n)
	}
}

// BenchmarkKeyringRead compares the Signer's key-ring read, done once per
// Sign and Verify (SetKeys swaps the ring), as it is (an atomic.Pointer)
// with the mutex variants it would otherwise be. Run with -cpu 1,2: the
// atomic load stays cheap in parallel, a mutex's lock word bounces between
// cores.
func BenchmarkKeyringRead(b *testing.B) {
	ring, err := keyring.New([]keyring.Key{{ID: "k1", Secret: []byte("0123456789abcdef")}})
	if err != nil {
		b.Fatal(err)
	}
	var ptr atomic.Pointer[keyring.Ring]
	ptr.Store(ring)
	var (
		rw  sync.RWMutex
		mu  sync.Mutex
		cur = ring
	)
	run := func(read func() *keyring.Ring) func(b *testing.B) {
		return func(b *testing.B) {
			b.RunParallel(func(pb *testing.PB) {
				var n int
				for pb.Next() {
					if read().Signer() != nil {
						n++
					}
				}
				if n == 0 {
					b.Error("no signer read")
				}
			})
		}
	}
	b.Run("atomic", run(ptr.Load))
	b.Run("rwmutex", run(func() *keyring.Ring { rw.RLock(); r := cur; rw.RUnlock(); return r }))
	b.Run("mutex", run(func() *keyring.Ring { mu.Lock(); r := cur; mu.Unlock(); return r }))
}
