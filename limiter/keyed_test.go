package limiter_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckillkit/seckill/limiter"
)

func TestNewKeyedValidation(t *testing.T) {
	t.Parallel()
	bad := []struct {
		name  string
		rate  limiter.Limit
		burst int
		opts  []limiter.KeyedOption
	}{
		{"zero rate", 0, 1, nil},
		{"negative rate", -1, 1, nil},
		{"zero burst", 1, 0, nil},
		{"zero max keys", 1, 1, []limiter.KeyedOption{limiter.WithMaxKeys(0)}},
		{"zero shards", 1, 1, []limiter.KeyedOption{limiter.WithShards(0)}},
		{"too many shards", 1, 1, []limiter.KeyedOption{limiter.WithShards(1 << 20)}},
	}
	for _, tc := range bad {
		k, err := limiter.NewKeyed(tc.rate, tc.burst, tc.opts...)
		require.ErrorIs(t, err, limiter.ErrInvalidConfig, tc.name)
		require.Nil(t, k)
	}
	k, err := limiter.NewKeyed(limiter.Inf, 0)
	require.NoError(t, err)
	for range 100 {
		require.True(t, k.Allow("x"))
	}
	assert.Zero(t, k.Len(), "Inf stores nothing")
}

func TestKeyedEvictsIdleKeys(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	k, err := limiter.NewKeyed(10, 5, limiter.WithClock(clk), limiter.WithShards(1))
	require.NoError(t, err)
	for i := range 1000 {
		require.True(t, k.Allow("a"+strconv.Itoa(i)))
	}
	require.Equal(t, 1000, k.Len(), "no key is full yet: all kept")
	clk.Advance(time.Second) // every bucket refilled: idle
	for i := range 100 {
		require.True(t, k.Allow("b"+strconv.Itoa(i)))
	}
	assert.Less(t, k.Len(), 200, "full buckets were swept")
	// An evicted key comes back full: eviction lost nothing.
	r, err := k.AllowN(context.Background(), "a1", 5)
	require.NoError(t, err)
	assert.True(t, r.Allowed)
}

func TestKeyedCap(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	k, err := limiter.NewKeyed(1, 5, limiter.WithClock(clk), limiter.WithMaxKeys(64), limiter.WithShards(4))
	require.NoError(t, err)
	for i := range 5000 {
		k.Allow("k" + strconv.Itoa(i))
		require.LessOrEqual(t, k.Len(), 64)
	}
	// a key kept under pressure is still limited
	for range 5 {
		k.Allow("hot")
	}
	assert.False(t, k.Allow("hot"))
}

func TestKeyedResultOnClock(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	k, err := limiter.NewKeyed(2, 2, limiter.WithClock(clk))
	require.NoError(t, err)
	ctx := context.Background()
	r, err := k.AllowN(ctx, "u", 2)
	require.NoError(t, err)
	assert.Equal(t, limiter.Result{Allowed: true, Limit: 2, Remaining: 0, ResetAfter: time.Second}, r)
	clk.Advance(100 * time.Millisecond)
	r, err = k.AllowN(ctx, "u", 1)
	require.NoError(t, err)
	assert.Equal(t, limiter.Result{Allowed: false, Limit: 2, Remaining: 0, RetryAfter: 400 * time.Millisecond, ResetAfter: 900 * time.Millisecond}, r)
}

// TestKeyedConcurrentWithEviction hammers few hot keys while many cold keys
// force sweeps and cap evictions; run with -race. Hot keys must never be
// over-admitted: at a frozen clock each allows exactly burst unless it was
// evicted (which only happens at the cap, not here: the cap is large).
func TestKeyedConcurrentWithEviction(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	k, err := limiter.NewKeyed(1, 20, limiter.WithClock(clk), limiter.WithShards(2))
	require.NoError(t, err)
	var allowed [4]atomic.Int64
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 300 {
				h := (g + i) % 4
				if k.Allow("hot" + strconv.Itoa(h)) {
					allowed[h].Add(1)
				}
				k.Allow("cold" + strconv.Itoa(g*1000+i)) // full after use? no: forces growth + sweeps
			}
		})
	}
	wg.Wait()
	for h := range allowed {
		assert.Equal(t, int64(20), allowed[h].Load(), "hot%d", h)
	}
}

func TestKeyedRefundMissingKey(t *testing.T) {
	t.Parallel()
	k, err := limiter.NewKeyed(1, 1)
	require.NoError(t, err)
	require.NoError(t, k.RefundN(context.Background(), "nobody", 1))
	require.NoError(t, k.RefundN(context.Background(), "nobody", 0))
	assert.Zero(t, k.Len())
}
