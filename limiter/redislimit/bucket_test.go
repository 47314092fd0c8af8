package redislimit_test

import (
	"context"
	"strconv"
	"strings"
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

func TestRedisBucketTimeTable(t *testing.T) {
	t.Parallel()
	c, m := testenv.Miniredis(t)
	m.SetTime(t0)
	b, err := redislimit.NewBucket(c, 10, 5, redislimit.WithKeyPrefix(testenv.Prefix(t)), redislimit.WithName("global"))
	require.NoError(t, err)
	ctx := context.Background()
	steps := []struct {
		at        time.Duration
		n         int
		allowed   bool
		remaining int
		retry     time.Duration
	}{
		{0, 5, true, 0, 0},
		{0, 1, false, 0, 100 * time.Millisecond},
		{50 * time.Millisecond, 1, false, 0, 50 * time.Millisecond},
		{100 * time.Millisecond, 1, true, 0, 0},
		{100 * time.Millisecond, 2, false, 0, 200 * time.Millisecond},
		{400 * time.Millisecond, 2, true, 1, 0},
		{10 * time.Second, 5, true, 0, 0},
	}
	for i, s := range steps {
		m.SetTime(t0.Add(s.at))
		r, err := b.AllowN(ctx, "", s.n)
		require.NoError(t, err)
		assert.Equal(t, s.allowed, r.Allowed, "step %d", i)
		assert.Equal(t, s.remaining, r.Remaining, "step %d remaining", i)
		assert.Equal(t, s.retry, r.RetryAfter, "step %d retry", i)
	}
	keys := m.Keys()
	require.Len(t, keys, 1)
	assert.True(t, strings.HasSuffix(keys[0], "{tb:global:}"), keys[0])
}

// TestRedisBucketGlobalAcrossInstances: several "app servers" (limiters
// with their own clients) share one global budget on the same Redis.
func TestRedisBucketGlobalAcrossInstances(t *testing.T) {
	t.Parallel()
	for kind, c := range testenv.AllRedis(t) {
		t.Run(string(kind), func(t *testing.T) {
			prefix := testenv.Prefix(t)
			var instances []*redislimit.Bucket
			for range 3 {
				b, err := redislimit.NewBucket(c, limiter.Every(time.Hour), 40, redislimit.WithKeyPrefix(prefix), redislimit.WithName("global"))
				require.NoError(t, err)
				instances = append(instances, b)
			}
			var allowed atomic.Int64
			var wg sync.WaitGroup
			for g := range 12 {
				wg.Go(func() {
					for range 10 {
						r, err := instances[g%3].AllowN(context.Background(), "all", 1)
						if !assert.NoError(t, err) {
							return
						}
						if r.Allowed {
							allowed.Add(1)
						}
					}
				})
			}
			wg.Wait()
			assert.Equal(t, int64(40), allowed.Load(), "one shared budget")
		})
	}
}

// TestRedisLimitersRejectInexactNumbers: the scripts compute in Lua
// doubles, exact up to 2^53-1 only. A rate, burst or cost above that would
// be rounded inside Redis, so it is refused in Go and reaches no script.
func TestRedisLimitersRejectInexactNumbers(t *testing.T) {
	t.Parallel()
	c, m := testenv.Miniredis(t)
	m.SetTime(t0)
	const maxExact = 1<<53 - 1

	_, err := redislimit.NewBucket(c, limiter.Limit(maxExact+1), 1)
	require.ErrorIs(t, err, limiter.ErrInvalidConfig, "rate 2^53")
	assert.ErrorContains(t, err, "2^53-1")
	_, err = redislimit.NewBucket(c, limiter.Limit(maxExact), 1)
	require.NoError(t, err, "rate 2^53-1 is exact")

	if strconv.IntSize < 64 {
		t.Skip("int cannot exceed 2^53-1 here")
	}
	shift := 53
	big := 1 << shift // 2^53: not a constant, so that the test compiles where int has 32 bits
	_, err = redislimit.NewBucket(c, 1e9, big)
	require.ErrorIs(t, err, limiter.ErrInvalidConfig, "burst 2^53")
	assert.ErrorContains(t, err, "2^53-1")
	_, err = redislimit.NewBucket(c, 1e9, big-1)
	require.NoError(t, err, "burst 2^53-1 is exact")

	// A refund of 2^53 is refused and gives nothing back.
	ctx := context.Background()
	prefix := testenv.Prefix(t)
	rb, err := redislimit.NewBucket(c, limiter.Every(time.Hour), 2, redislimit.WithKeyPrefix(prefix), redislimit.WithName("rb"))
	require.NoError(t, err)
	sw, err := redislimit.NewSlidingWindow(c, 2, time.Hour, redislimit.WithKeyPrefix(prefix), redislimit.WithName("sw"))
	require.NoError(t, err)
	for _, l := range []interface {
		limiter.Limiter
		limiter.Refunder
	}{rb, sw} {
		r, err := l.AllowN(ctx, "k", 2)
		require.NoError(t, err)
		require.True(t, r.Allowed)
		err = l.RefundN(ctx, "k", big)
		require.ErrorIs(t, err, limiter.ErrInvalidArgument)
		assert.ErrorContains(t, err, "2^53-1")
		r, err = l.AllowN(ctx, "k", 1)
		require.NoError(t, err)
		assert.False(t, r.Allowed, "%T: the refused refund gave nothing back", l)
	}
}
