package limiter_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/seckillkit/seckill/limiter"
)

func TestRedisBucketTimeTable(t *testing.T) {
	t.Parallel()
	c, m := testenv.Miniredis(t)
	m.SetTime(t0)
	b, err := limiter.NewRedisBucket(c, 10, 5, limiter.WithKeyPrefix(testenv.Prefix(t)), limiter.WithName("global"))
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
			var instances []*limiter.RedisBucket
			for range 3 {
				b, err := limiter.NewRedisBucket(c, limiter.Every(time.Hour), 40, limiter.WithKeyPrefix(prefix), limiter.WithName("global"))
				require.NoError(t, err)
				instances = append(instances, b)
			}
			var allowed atomic.Int64
			var wg sync.WaitGroup
			for g := range 12 {
				wg.Go(func() {
					for range 10 {
						r, err := instances[g%3].Allow(context.Background(), "all")
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
