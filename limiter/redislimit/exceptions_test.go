package redislimit_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/seckillkit/seckill/limiter"
	"github.com/seckillkit/seckill/limiter/redislimit"
)

// countAllowed makes tries decisions of one event for key and counts the
// allowed ones.
func countAllowed(t *testing.T, l limiter.Limiter, key string, tries int) int {
	t.Helper()
	n := 0
	for range tries {
		r, err := l.AllowN(context.Background(), key, 1)
		require.NoError(t, err)
		if r.Allowed {
			n++
		}
	}
	return n
}

// TestRedisSlidingWindowExceptions: a key given WithException has its own
// limit per window, counted from the decisions and from the sorted set in
// Redis; the other keys keep the limiter's.
func TestRedisSlidingWindowExceptions(t *testing.T) {
	t.Parallel()
	c, m := testenv.Miniredis(t)
	m.SetTime(t0)
	prefix := testenv.Prefix(t)
	sw, err := redislimit.NewSlidingWindow(c, 2, time.Second, redislimit.WithKeyPrefix(prefix), redislimit.WithName("buy"),
		redislimit.WithException("user:vip", 5), redislimit.WithException("item:hot", 1))
	require.NoError(t, err)
	ctx := context.Background()
	for round := range 2 {
		assert.Equal(t, 2, countAllowed(t, sw, "user:7", 10), "round %d: the limiter's limit", round)
		assert.Equal(t, 5, countAllowed(t, sw, "user:vip", 10), "round %d: vip's own limit", round)
		assert.Equal(t, 1, countAllowed(t, sw, "item:hot", 10), "round %d: the hot item's own limit", round)
		for key, want := range map[string]int64{"user:7": 2, "user:vip": 5, "item:hot": 1} {
			n, err := c.ZCard(ctx, prefix+"{sw:buy:"+key+"}").Result()
			require.NoError(t, err)
			assert.Equal(t, want, n, "round %d: events recorded in Redis for %s", round, key)
		}
		m.SetTime(t0.Add(time.Duration(round+1) * time.Second))
	}
	r, err := sw.AllowN(ctx, "user:vip", 5) // a new window: the last events are 1 s old
	require.NoError(t, err)
	assert.True(t, r.Allowed, "a cost up to the exception's limit")
	assert.Equal(t, 5, r.Limit, "the Result is the exception's")
	_, err = sw.AllowN(ctx, "user:7", 5)
	require.ErrorIs(t, err, limiter.ErrInvalidArgument, "5 is above the limiter's limit for other keys")

	// The fused form decides with the exception's limit too.
	chk := sw.AllowCheck("user:vip")
	assert.Equal(t, "5", chk.Args[1])
	dr, err := chk.Decode(ctx, []any{int64(0), int64(0), int64(1), int64(1)})
	require.NoError(t, err)
	assert.Equal(t, 5, dr.Limit)
}

// TestRedisBucketExceptions: a key given WithException has its own burst,
// refilled in the time the limiter's burst is (rate × limit / burst), on
// Redis TIME; a refund never fills it beyond its own burst.
func TestRedisBucketExceptions(t *testing.T) {
	t.Parallel()
	c, m := testenv.Miniredis(t)
	m.SetTime(t0)
	// Rates whose µs intervals are exact (the script keeps 3 decimals).
	b, err := redislimit.NewBucket(c, 4, 4, redislimit.WithKeyPrefix(testenv.Prefix(t)), redislimit.WithName("item"),
		redislimit.WithException("item:hot", 1), redislimit.WithException("item:vip", 8))
	require.NoError(t, err)
	assert.Equal(t, 4, countAllowed(t, b, "item:1", 10))
	assert.Equal(t, 1, countAllowed(t, b, "item:hot", 10), "the hot item: burst 1")
	assert.Equal(t, 8, countAllowed(t, b, "item:vip", 10), "vip: burst 8")

	m.SetTime(t0.Add(500 * time.Millisecond))
	assert.Equal(t, 2, countAllowed(t, b, "item:1", 10), "4/s: 2 tokens in 500 ms")
	assert.Equal(t, 0, countAllowed(t, b, "item:hot", 10), "1/s: 0.5 tokens in 500 ms")
	assert.Equal(t, 4, countAllowed(t, b, "item:vip", 10), "8/s: 4 tokens in 500 ms")

	m.SetTime(t0.Add(time.Second))
	ctx := context.Background()
	r, err := b.AllowN(ctx, "item:hot", 1)
	require.NoError(t, err)
	assert.Equal(t, limiter.Result{Allowed: true, Limit: 1, ResetAfter: time.Second}, r)
	require.NoError(t, b.RefundN(ctx, "item:hot", 5))
	assert.Equal(t, 1, countAllowed(t, b, "item:hot", 10), "the refund filled the hot item's bucket to its burst of 1")
}

// TestRedisExceptionFallback: under FallbackLocal the default in-process
// fallback applies the exceptions too.
func TestRedisExceptionFallback(t *testing.T) {
	t.Parallel()
	quiet := redislimit.WithLogger(slog.New(slog.DiscardHandler))
	c, m := fastFailClient(t)
	b, err := redislimit.NewBucket(c, limiter.Every(time.Hour), 3, redislimit.WithFailurePolicy(limiter.FallbackLocal), quiet,
		redislimit.WithException("item:hot", 1))
	require.NoError(t, err)
	sw, err := redislimit.NewSlidingWindow(c, 3, time.Hour, redislimit.WithFailurePolicy(limiter.FallbackLocal), quiet,
		redislimit.WithException("user:vip", 5))
	require.NoError(t, err)
	m.Close()
	assert.Equal(t, 3, countAllowed(t, b, "item:1", 10))
	assert.Equal(t, 1, countAllowed(t, b, "item:hot", 10))
	assert.Equal(t, 3, countAllowed(t, sw, "user:7", 10))
	assert.Equal(t, 5, countAllowed(t, sw, "user:vip", 10))
}

func TestRedisExceptionValidation(t *testing.T) {
	t.Parallel()
	c, _ := testenv.Miniredis(t)
	_, err := redislimit.NewSlidingWindow(c, 3, time.Second, redislimit.WithException("k", 0))
	require.ErrorIs(t, err, limiter.ErrInvalidConfig)
	_, err = redislimit.NewSlidingWindow(c, 3, time.Second, redislimit.WithException("k", 1<<20+1))
	require.ErrorIs(t, err, limiter.ErrInvalidConfig)
	_, err = redislimit.NewBucket(c, 3, 3, redislimit.WithException("k", 0))
	require.ErrorIs(t, err, limiter.ErrInvalidConfig)
	_, err = redislimit.NewBucket(c, 3, 3, redislimit.WithException("k", 1), redislimit.WithException("k", -1))
	require.ErrorIs(t, err, limiter.ErrInvalidConfig, "the last one given wins")

	// A Priority over an excepted key shares that key's own burst.
	b, err := redislimit.NewBucket(c, 10, 10, redislimit.WithKeyPrefix(testenv.Prefix(t)), redislimit.WithException("all", 40))
	require.NoError(t, err)
	p, err := redislimit.NewPriority(b, "all", limiter.PriorityClass{Name: "hi"}, limiter.PriorityClass{Name: "lo", Floor: 30})
	require.NoError(t, err, "floor 30 is below the key's burst of 40")
	r, err := p.AllowN(context.Background(), "lo", 10)
	require.NoError(t, err)
	assert.True(t, r.Allowed)
	assert.Equal(t, 10, r.Limit)
}

// TestRedisBucketRateOne: a rate of 1/s is an interval of 1000000 µs, sent
// in plain decimals (miniredis's Lua reads "1e+06" as nil).
func TestRedisBucketRateOne(t *testing.T) {
	t.Parallel()
	c, m := testenv.Miniredis(t)
	m.SetTime(t0)
	b, err := redislimit.NewBucket(c, 1, 2, redislimit.WithKeyPrefix(testenv.Prefix(t)))
	require.NoError(t, err)
	assert.Equal(t, 2, countAllowed(t, b, "k", 5))
	m.SetTime(t0.Add(time.Second))
	assert.Equal(t, 1, countAllowed(t, b, "k", 5))
}
