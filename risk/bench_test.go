package risk

// The in-process benchmarks (ClientIP, ParseBearer, Checker, the middleware's
// overhead) run side by side with their anchor, x/time/rate Allow, in the
// repository's bench module, so that this module does not require the
// anchor: cd bench && go test -run '^$' -bench . -benchmem ./risk/. The
// Redis-bound ones below are measured against a plain go-redis GET of the
// same run (BenchmarkAnchorRedisGet).

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seckillkit/seckill/internal/testenv"
)

type discardWriter struct{ h http.Header }

func (d discardWriter) Header() http.Header         { return d.h }
func (d discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (d discardWriter) WriteHeader(int)             {}

// --- Redis-bound (real server only) ---

func realRedis(b *testing.B) *redis.Client {
	if os.Getenv(testenv.EnvRedisAddr) == "" {
		b.Skip("SECKILL_REDIS_ADDR not set: Redis-bound benchmarks need a real server")
	}
	return testenv.RealRedis(b)
}

const benchParallel = 25 // × GOMAXPROCS(2) = 50 goroutines, like redis-benchmark -c 50 (BENCHMARKS.md)

// BenchmarkAnchorRedisGet is the go-redis plain GET in the same run (the
// Redis anchor for the one-GET auth path).
func BenchmarkAnchorRedisGet(b *testing.B) {
	rdb := realRedis(b)
	key := testenv.Prefix(b) + "anchor"
	rdb.Set(bg, key, "u1", time.Hour)
	b.SetParallelism(benchParallel)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := rdb.Get(bg, key).Err(); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkSessionAuthenticate(b *testing.B) {
	rdb := realRedis(b)
	s, _ := NewSessionStore(rdb, SessionConfig{KeyPrefix: testenv.Prefix(b)})
	toks := make([]string, 1000)
	for i := range toks {
		toks[i], _ = s.Create(bg, fmt.Sprint("u", i), time.Hour)
	}
	var i atomic.Int64
	b.SetParallelism(benchParallel)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.Authenticate(bg, toks[i.Add(1)%int64(len(toks))]); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkBlacklistCheck(b *testing.B) {
	rdb := realRedis(b)
	bl, _ := NewBlacklist(rdb, BlacklistConfig{KeyPrefix: testenv.Prefix(b)})
	for _, c := range []struct {
		name string
		s    Subject
	}{
		{"user", Subject{UserID: "u1"}},
		{"user+ip+device", Subject{UserID: "u1", IP: netipMust("203.0.113.7"), DeviceID: "d1"}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetParallelism(benchParallel)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := bl.Check(bg, c.s); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

func BenchmarkBehaviourRecord(b *testing.B) {
	rdb := realRedis(b)
	beh, _ := NewBehaviour(rdb, BehaviourConfig{Window: time.Second, FlagAt: 50, DenyAt: 100, KeyPrefix: testenv.Prefix(b)})
	var i atomic.Int64
	b.SetParallelism(benchParallel)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := beh.Record(bg, fmt.Sprint("u", i.Add(1)%10000)); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkDeviceBind(b *testing.B) {
	rdb := realRedis(b)
	d, _ := NewDeviceBinder(rdb, DeviceBinderConfig{KeyPrefix: testenv.Prefix(b), BindTTL: time.Minute})
	var i atomic.Int64
	b.SetParallelism(benchParallel)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			n := i.Add(1) % 10000
			if _, err := d.Bind(bg, fmt.Sprint("d", n), fmt.Sprint("u", n)); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkStack is a full request through Auth (SessionStore) and
// Middleware(Blacklist, Behaviour, DeviceBinder): 4 Redis round trips.
func BenchmarkStack(b *testing.B) {
	rdb := realRedis(b)
	p := testenv.Prefix(b)
	sessions, _ := NewSessionStore(rdb, SessionConfig{KeyPrefix: p})
	bl, _ := NewBlacklist(rdb, BlacklistConfig{KeyPrefix: p})
	beh, _ := NewBehaviour(rdb, BehaviourConfig{Window: time.Second, FlagAt: 1000, DenyAt: 2000, KeyPrefix: p})
	dev, _ := NewDeviceBinder(rdb, DeviceBinderConfig{KeyPrefix: p})
	chk, _ := NewChecker([]Rule{bl, beh, dev})
	mw, _ := NewMiddleware(chk)
	auth, _ := NewAuth(sessions)
	h := auth(mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})))
	toks := make([]string, 1000)
	for i := range toks {
		toks[i], _ = sessions.Create(bg, fmt.Sprint("u", i), time.Hour)
	}
	var i atomic.Int64
	b.SetParallelism(benchParallel)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		w := discardWriter{h: http.Header{}}
		for pb.Next() {
			n := i.Add(1) % int64(len(toks))
			r := httptest.NewRequest(http.MethodPost, "/buy", nil)
			r.Header.Set("Authorization", "Bearer "+toks[n])
			r.Header.Set("X-Device-ID", fmt.Sprint("d", n))
			h.ServeHTTP(w, r)
		}
	})
}

// BenchmarkNonceCounter compares the per-Record nonce counter of
// [Behaviour] as it is (an atomic.Uint64) with a mutex-guarded counter.
// Run with -cpu 1,2.
func BenchmarkNonceCounter(b *testing.B) {
	var (
		a  atomic.Uint64
		mu sync.Mutex
		n  uint64
	)
	b.Run("atomic", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				a.Add(1)
			}
		})
	})
	b.Run("mutex", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				mu.Lock()
				n++
				mu.Unlock()
			}
		})
	})
}

// BenchmarkAuthCacheHit is the in-process hot path of [AuthCache]: a hit
// (one clock read, one map lookup under the mutex; no hashing, no
// allocation), without and with Revocations (Run subscribed on
// miniredis): the two cost the same. 1,000 tokens, all cached.
func BenchmarkAuthCacheHit(b *testing.B) {
	next := AuthenticatorFunc(func(_ context.Context, tok string) (string, error) { return "u-" + tok, nil })
	rdb, _ := testenv.Miniredis(b)
	store, _ := NewSessionStore(rdb, SessionConfig{})
	for _, c := range []struct {
		name string
		revs *SessionStore
	}{{"plain", nil}, {"revocations", store}} {
		b.Run(c.name, func(b *testing.B) {
			cache, err := NewAuthCache(next, AuthCacheConfig{TTL: time.Hour, Max: 2000, Revocations: c.revs})
			if err != nil {
				b.Fatal(err)
			}
			if c.revs != nil {
				ctx, cancel := context.WithCancel(bg)
				done := make(chan error, 1)
				go func() { done <- cache.Run(ctx) }()
				defer func() { cancel(); <-done }()
				for live, _, _, _ := cacheState(cache); !live; live, _, _, _ = cacheState(cache) {
					runtime.Gosched()
				}
			}
			toks := make([]string, 1000)
			for i := range toks {
				toks[i] = fmt.Sprintf("tok-%039d", i)
				if _, err := cache.Authenticate(bg, toks[i]); err != nil {
					b.Fatal(err)
				}
			}
			if cache.size() != len(toks) {
				b.Fatalf("%d cached, want %d", cache.size(), len(toks))
			}
			var i atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := cache.Authenticate(bg, toks[i.Add(1)%int64(len(toks))]); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
