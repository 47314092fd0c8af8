package redislimit_test

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/seckillkit/seckill/limiter"
	"github.com/seckillkit/seckill/limiter/redislimit"
)

// The classes of the priority tests: highest first, floors 0 < 10 < 20 in a
// bucket of 30 tokens.
var testClasses = []limiter.PriorityClass{
	{Name: "verified"}, {Name: "normal", Floor: 10}, {Name: "suspect", Floor: 20},
}

func TestNewRedisPriorityValidation(t *testing.T) {
	t.Parallel()
	c, _ := testenv.Miniredis(t)
	b, err := redislimit.NewBucket(c, 10, 10)
	require.NoError(t, err)
	p, err := redislimit.NewPriority(nil, "all", testClasses...)
	require.ErrorIs(t, err, limiter.ErrInvalidConfig)
	require.Nil(t, p)
	for name, classes := range map[string][]limiter.PriorityClass{
		"no class":           nil,
		"repeated name":      {{Name: "a"}, {Name: "a", Floor: 1}},
		"equal floors":       {{Name: "a", Floor: 2}, {Name: "b", Floor: 2}},
		"floor at the burst": {{Name: "a"}, {Name: "b", Floor: 10}},
	} {
		p, err := redislimit.NewPriority(b, "all", classes...)
		require.ErrorIs(t, err, limiter.ErrInvalidConfig, name)
		require.Nil(t, p, name)
	}
}

// redisTokens reads the tokens left in the bucket key from Redis: burst
// minus (tat − now) / interval, the GCRA state the script keeps.
func redisTokens(t *testing.T, get func() (string, error), now time.Time, interval time.Duration, burst int) float64 {
	t.Helper()
	v, err := get()
	require.NoError(t, err)
	tat, err := strconv.ParseFloat(v, 64)
	require.NoError(t, err)
	nowUS := float64(now.UnixMicro() - 1700000000*1e6)
	return float64(burst) - (tat-nowUS)/float64(interval.Microseconds())
}

// TestRedisPriorityShedsLowestFirst: on Redis TIME (miniredis, moved in
// 10 ms ticks for 10 s), three classes offer three times the capacity
// (verified 50/s, normal 100/s, suspect 150/s; the bucket 100/s, burst 30):
// verified gets every request, suspect is shed first, and the admissions,
// counted, plus the tokens left in the Redis key equal burst + rate·t
// exactly: nothing was admitted beyond the bucket.
func TestRedisPriorityShedsLowestFirst(t *testing.T) {
	t.Parallel()
	c, m := testenv.Miniredis(t)
	m.SetTime(t0)
	prefix := testenv.Prefix(t)
	b, err := redislimit.NewBucket(c, 100, 30, redislimit.WithKeyPrefix(prefix), redislimit.WithName("global"),
		redislimit.WithBatching(0))
	require.NoError(t, err)
	p, err := redislimit.NewPriority(b, "all", testClasses...)
	require.NoError(t, err)
	ctx := context.Background()
	offers := []struct {
		class   string
		perTick []int
	}{{"suspect", []int{1, 2}}, {"normal", []int{1}}, {"verified", []int{1, 0}}}
	admitted, offered := map[string]int{}, map[string]int{}
	const ticks = 1000
	now := t0
	for tick := range ticks {
		for _, o := range offers {
			for range o.perTick[tick%len(o.perTick)] {
				offered[o.class]++
				r, err := p.AllowN(ctx, o.class, 1)
				require.NoError(t, err)
				if r.Allowed {
					admitted[o.class]++
				}
			}
		}
		now = now.Add(10 * time.Millisecond)
		m.SetTime(now)
	}
	t.Logf("admitted %v of %v", admitted, offered)
	assert.Equal(t, offered["verified"], admitted["verified"], "the top class keeps its whole rate")
	assert.LessOrEqual(t, admitted["suspect"], 30-20+1, "the lowest class only gets its band of the initial burst")
	assert.Greater(t, admitted["normal"], 400, "the middle class gets what the top leaves")

	sum := admitted["verified"] + admitted["normal"] + admitted["suspect"]
	left := redisTokens(t, c.Get(ctx, prefix+"{tb:global:all}").Result, now, 10*time.Millisecond, 30)
	assert.InDelta(t, 30+100*10, float64(sum)+left, 1e-6, "admitted + left in Redis = burst + rate·t")
	assert.LessOrEqual(t, left, 11.0, "under overload the bucket is drained to the middle class's floor (+ the last tick's refill)")
}

// TestRedisPriorityAcrossInstances: several app servers (Priority values
// with their own Bucket) share one key; a hammer from many goroutines is
// admitted exactly the burst in total (the refill is one token an hour),
// no class below its floor, and the Redis key holds what was not admitted.
func TestRedisPriorityAcrossInstances(t *testing.T) {
	t.Parallel()
	for kind, c := range testenv.AllRedis(t) {
		t.Run(string(kind), func(t *testing.T) {
			prefix := testenv.Prefix(t)
			var instances []*redislimit.Priority
			for range 3 {
				b, err := redislimit.NewBucket(c, limiter.Every(time.Hour), 30, redislimit.WithKeyPrefix(prefix), redislimit.WithName("global"))
				require.NoError(t, err)
				p, err := redislimit.NewPriority(b, "all", testClasses...)
				require.NoError(t, err)
				instances = append(instances, p)
			}
			var admitted [3]atomic.Int64
			var wg sync.WaitGroup
			for g := range 12 {
				wg.Go(func() {
					for i := range 20 {
						cl := (g + i) % 3
						r, err := instances[g%3].AllowN(context.Background(), testClasses[cl].Name, 1)
						if !assert.NoError(t, err) {
							return
						}
						if r.Allowed {
							admitted[cl].Add(1)
						}
					}
				})
			}
			wg.Wait()
			sum := admitted[0].Load() + admitted[1].Load() + admitted[2].Load()
			assert.Equal(t, int64(30), sum, "one shared budget, exactly")
			// Counted from Redis: what the key holds plus what was admitted is
			// the burst (plus a refill of one token an hour: < 0.1 in 6 min).
			left := redisTokens(t, c.Get(context.Background(), prefix+"{tb:global:all}").Result, time.Now(), time.Hour, 30)
			assert.InDelta(t, 30, float64(sum)+left, 0.1, "admitted + left in Redis = burst")
			assert.LessOrEqual(t, admitted[2].Load(), int64(10), "suspect stops at its floor")
			assert.LessOrEqual(t, admitted[1].Load()+admitted[2].Load(), int64(20), "normal and suspect stop at normal's floor")
			r, err := instances[0].AllowN(context.Background(), "verified", 1)
			require.NoError(t, err)
			assert.False(t, r.Allowed, "Redis holds no whole token")
		})
	}
}

// TestRedisPriorityResult: each class sees the key above its floor, and a
// refund goes back to the shared key.
func TestRedisPriorityResult(t *testing.T) {
	t.Parallel()
	c, m := testenv.Miniredis(t)
	m.SetTime(t0)
	b, err := redislimit.NewBucket(c, 100, 30, redislimit.WithKeyPrefix(testenv.Prefix(t)))
	require.NoError(t, err)
	p, err := redislimit.NewPriority(b, "all", testClasses...)
	require.NoError(t, err)
	ctx := context.Background()
	r, err := p.AllowN(ctx, "suspect", 10)
	require.NoError(t, err)
	assert.Equal(t, limiter.Result{Allowed: true, Limit: 10, Remaining: 0, ResetAfter: 100 * time.Millisecond}, r)
	r, err = p.AllowN(ctx, "suspect", 1)
	require.NoError(t, err)
	assert.Equal(t, limiter.Result{Limit: 10, RetryAfter: 10 * time.Millisecond, ResetAfter: 100 * time.Millisecond}, r)
	r, err = p.AllowN(ctx, "normal", 1)
	require.NoError(t, err)
	assert.Equal(t, limiter.Result{Allowed: true, Limit: 20, Remaining: 9, ResetAfter: 110 * time.Millisecond}, r)
	r, err = b.AllowN(ctx, "all", 1)
	require.NoError(t, err)
	assert.Equal(t, 18, r.Remaining, "the bucket's own view of the same key: 12 spent")

	_, err = p.AllowN(ctx, "vip", 1)
	require.ErrorIs(t, err, limiter.ErrInvalidArgument)
	_, err = p.AllowN(ctx, "suspect", 11)
	require.ErrorIs(t, err, limiter.ErrInvalidArgument)
	require.ErrorIs(t, p.RefundN(ctx, "vip", 1), limiter.ErrInvalidArgument)

	require.NoError(t, p.RefundN(ctx, "suspect", 10))
	r, err = p.AllowN(ctx, "suspect", 8)
	require.NoError(t, err)
	assert.True(t, r.Allowed, "the refund went back to the shared key")
}

// TestRedisPriorityFallbackKeepsClasses: with Redis down under
// FallbackLocal and the default fallback, an in-process Priority decides,
// so the lowest class is still shed first; with the bucket's own fallback,
// that limiter decides for the bucket key.
func TestRedisPriorityFallbackKeepsClasses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	quiet := slog.New(slog.DiscardHandler)
	c, m := fastFailClient(t)
	var failures atomic.Int64
	b, err := redislimit.NewBucket(c, limiter.Every(time.Hour), 30, redislimit.WithKeyPrefix(testenv.Prefix(t)),
		redislimit.WithFailurePolicy(limiter.FallbackLocal), redislimit.WithLogger(quiet),
		redislimit.WithOnFailure(func(_ context.Context, key string, _ error) {
			assert.Equal(t, "all", key, "the hook gets the bucket key")
			failures.Add(1)
		}))
	require.NoError(t, err)
	p, err := redislimit.NewPriority(b, "all", testClasses...)
	require.NoError(t, err)
	m.Close()
	got := 0
	for range 15 {
		r, err := p.AllowN(ctx, "suspect", 1)
		require.NoError(t, err)
		assert.True(t, r.Degraded)
		if r.Allowed {
			got++
		}
	}
	assert.Equal(t, 10, got, "suspect gets its band only, in the fallback too")
	r, err := p.AllowN(ctx, "verified", 1)
	require.NoError(t, err)
	assert.True(t, r.Allowed && r.Degraded, "verified still passes")
	assert.Equal(t, int64(16), failures.Load(), "every failure reported")

	c2, m2 := fastFailClient(t)
	fb, err := limiter.NewKeyed(limiter.Every(time.Hour), 1)
	require.NoError(t, err)
	b2, err := redislimit.NewBucket(c2, 100, 30, redislimit.WithFailurePolicy(limiter.FallbackLocal), redislimit.WithFallback(fb),
		redislimit.WithLogger(quiet))
	require.NoError(t, err)
	p2, err := redislimit.NewPriority(b2, "all", testClasses...)
	require.NoError(t, err)
	m2.Close()
	r, err = p2.AllowN(ctx, "suspect", 1)
	require.NoError(t, err)
	assert.True(t, r.Allowed && r.Degraded)
	assert.False(t, fb.Allow("all"), "the bucket's own fallback decided for the bucket key")
}
