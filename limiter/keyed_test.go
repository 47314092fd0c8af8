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

// TestKeyedExceptions: a key given WithException has its own rate and
// burst (counted at a frozen clock, then after a refill); the other keys
// keep the limiter's; an Inf exception is not limited.
func TestKeyedExceptions(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	k, err := limiter.NewKeyed(1, 2, limiter.WithClock(clk),
		limiter.WithException("vip", 10, 5),
		limiter.WithException("hot-item", limiter.Every(time.Minute), 1),
		limiter.WithException("internal", limiter.Inf, 0))
	require.NoError(t, err)
	count := func(key string, tries int) int {
		n := 0
		for range tries {
			if k.Allow(key) {
				n++
			}
		}
		return n
	}
	assert.Equal(t, 5, count("vip", 20), "vip: its own burst")
	assert.Equal(t, 2, count("user", 20), "others: the limiter's burst")
	assert.Equal(t, 1, count("hot-item", 20), "hot item: its own, lower burst")
	assert.Equal(t, 100, count("internal", 100), "an Inf exception is not limited")

	clk.Advance(500 * time.Millisecond)
	assert.Equal(t, 5, count("vip", 20), "vip refilled at 10/s")
	assert.Equal(t, 0, count("user", 20), "user refills at 1/s")
	assert.Equal(t, 0, count("hot-item", 20), "hot item refills at 1/min")

	ctx := context.Background()
	r, err := k.AllowN(ctx, "vip", 1)
	require.NoError(t, err)
	assert.Equal(t, limiter.Result{Limit: 5, RetryAfter: 100 * time.Millisecond, ResetAfter: 500 * time.Millisecond}, r,
		"the Result is the exception's")
	_, err = k.AllowN(ctx, "vip", 5)
	require.NoError(t, err, "a cost up to the exception's burst is valid")
	_, err = k.AllowN(ctx, "user", 5)
	require.ErrorIs(t, err, limiter.ErrInvalidArgument, "above the limiter's burst for other keys")
	require.NoError(t, k.RefundN(ctx, "vip", 100))
	assert.Equal(t, 5, count("vip", 20), "a refund fills the exception's bucket, never beyond its burst")
}

func TestKeyedExceptionValidation(t *testing.T) {
	t.Parallel()
	for name, opt := range map[string]limiter.KeyedOption{
		"empty key":          limiter.WithException("", 1, 1),
		"zero rate":          limiter.WithException("k", 0, 1),
		"negative rate":      limiter.WithException("k", -1, 1),
		"zero burst":         limiter.WithException("k", 1, 0),
		"last one given bad": limiter.KeyedOption(nil),
	} {
		opts := []limiter.KeyedOption{opt}
		if name == "last one given bad" {
			opts = []limiter.KeyedOption{limiter.WithException("k", 1, 1), limiter.WithException("k", 1, 0)}
		}
		k, err := limiter.NewKeyed(1, 1, opts...)
		require.ErrorIs(t, err, limiter.ErrInvalidConfig, name)
		require.Nil(t, k, name)
	}
	// An exception under an unlimited limiter still limits its key.
	k, err := limiter.NewKeyed(limiter.Inf, 0, limiter.WithException("hot", 1, 1))
	require.NoError(t, err)
	assert.True(t, k.Allow("hot"))
	assert.False(t, k.Allow("hot"))
	assert.True(t, k.Allow("other"))
	assert.True(t, k.Allow("other"))
}

// BenchmarkKeyedExceptions: Keyed.Allow without exceptions (the anchor)
// beside the same call on a limiter holding exceptions, for a plain key and
// for an excepted one.
func BenchmarkKeyedExceptions(b *testing.B) {
	plain, err := limiter.NewKeyed(1e9, 1e6)
	require.NoError(b, err)
	exc, err := limiter.NewKeyed(1e9, 1e6, limiter.WithException("vip", 2e9, 2e6), limiter.WithException("hot", 1e8, 1e5))
	require.NoError(b, err)
	for _, bc := range []struct {
		name string
		k    *limiter.Keyed
		key  string
	}{{"impl=no-exceptions", plain, "user:42"}, {"impl=exceptions/key=plain", exc, "user:42"}, {"impl=exceptions/key=excepted", exc, "vip"}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				bc.k.Allow(bc.key)
			}
		})
	}
}
