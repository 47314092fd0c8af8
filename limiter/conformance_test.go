package limiter_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/seckillkit/seckill/limiter"
	"github.com/seckillkit/seckill/limiter/redislimit"
)

// impl builds one implementation of limiter.Limiter allowing limit events
// per period per key (a full reset after period). advance moves its clock;
// it is nil on real servers, whose clock cannot be moved: time-driven cases
// are then skipped (the others use a period long enough not to refill).
type impl struct {
	name string
	new  func(t *testing.T, limit int, period time.Duration) (l limiter.Limiter, advance func(time.Duration))
}

func impls(t *testing.T) []impl {
	t.Helper()
	out := []impl{{
		name: "keyed",
		new: func(t *testing.T, limit int, period time.Duration) (limiter.Limiter, func(time.Duration)) {
			clk := newFakeClock()
			k, err := limiter.NewKeyed(limiter.Per(limit, period), limit, limiter.WithClock(clk))
			require.NoError(t, err)
			return k, clk.Advance
		},
	}}
	for _, kind := range []testenv.RedisKind{testenv.KindMiniredis, testenv.KindStandalone, testenv.KindCluster} {
		for _, store := range []string{"slidingwindow", "redisbucket"} {
			out = append(out, impl{
				name: store + "/" + string(kind),
				new: func(t *testing.T, limit int, period time.Duration) (limiter.Limiter, func(time.Duration)) {
					var advance func(time.Duration)
					var rdb redis.UniversalClient
					switch kind {
					case testenv.KindMiniredis:
						c, m := testenv.Miniredis(t)
						now := testenv.Epoch() // miniredis TIME and TTLs are both fake
						m.SetTime(now)
						advance = func(d time.Duration) { now = now.Add(d); m.SetTime(now); m.FastForward(d) }
						rdb = c
					case testenv.KindStandalone:
						rdb = testenv.RealRedis(t)
					case testenv.KindCluster:
						rdb = testenv.RealCluster(t)
					}
					prefix := redislimit.WithKeyPrefix(testenv.Prefix(t))
					if store == "slidingwindow" {
						l, err := redislimit.NewSlidingWindow(rdb, limit, period, prefix)
						require.NoError(t, err)
						return l, advance
					}
					l, err := redislimit.NewBucket(rdb, limiter.Per(limit, period), limit, prefix)
					require.NoError(t, err)
					return l, advance
				},
			})
		}
	}
	return out
}

// runAll runs a behavioural test against every implementation (see
// docs/ARCHITECTURE.md, "Conformance suites").
func runAll(t *testing.T, timeDriven bool, f func(t *testing.T, mk func(limit int, period time.Duration) (limiter.Limiter, func(time.Duration)))) {
	for _, im := range impls(t) {
		t.Run(im.name, func(t *testing.T) {
			t.Parallel()
			mk := func(limit int, period time.Duration) (limiter.Limiter, func(time.Duration)) {
				l, adv := im.new(t, limit, period)
				if timeDriven && adv == nil {
					t.Skip("clock of a real server cannot be moved")
				}
				return l, adv
			}
			f(t, mk)
		})
	}
}

func TestConformanceBurstThenRefuse(t *testing.T) {
	t.Parallel()
	runAll(t, false, func(t *testing.T, mk func(int, time.Duration) (limiter.Limiter, func(time.Duration))) {
		l, _ := mk(5, time.Hour)
		ctx := context.Background()
		for i := range 5 {
			r, err := l.AllowN(ctx, "u1", 1)
			require.NoError(t, err)
			require.True(t, r.Allowed, "event %d", i)
			assert.Equal(t, 5, r.Limit)
			assert.Equal(t, 4-i, r.Remaining)
			assert.Zero(t, r.RetryAfter)
			assert.Greater(t, r.ResetAfter, time.Duration(0))
			assert.LessOrEqual(t, r.ResetAfter, time.Hour)
		}
		r, err := l.AllowN(ctx, "u1", 1)
		require.NoError(t, err)
		assert.False(t, r.Allowed)
		assert.Equal(t, 0, r.Remaining)
		assert.Greater(t, r.RetryAfter, time.Duration(0))
		assert.LessOrEqual(t, r.RetryAfter, time.Hour)

		// other keys are independent
		r, err = l.AllowN(ctx, "u2", 5)
		require.NoError(t, err)
		assert.True(t, r.Allowed)
		assert.Equal(t, 0, r.Remaining)
	})
}

func TestConformanceInvalidN(t *testing.T) {
	t.Parallel()
	runAll(t, false, func(t *testing.T, mk func(int, time.Duration) (limiter.Limiter, func(time.Duration))) {
		l, _ := mk(3, time.Hour)
		ctx := context.Background()
		for _, n := range []int{0, -1, 4} {
			r, err := l.AllowN(ctx, "k", n)
			require.ErrorIs(t, err, limiter.ErrInvalidArgument, "n=%d", n)
			assert.False(t, r.Allowed)
		}
		r, err := l.AllowN(ctx, "k", 3)
		require.NoError(t, err)
		assert.True(t, r.Allowed, "invalid calls spent nothing")
	})
}

func TestConformancePartialN(t *testing.T) {
	t.Parallel()
	runAll(t, false, func(t *testing.T, mk func(int, time.Duration) (limiter.Limiter, func(time.Duration))) {
		l, _ := mk(5, time.Hour)
		ctx := context.Background()
		r, err := l.AllowN(ctx, "k", 3)
		require.NoError(t, err)
		require.True(t, r.Allowed)
		r, err = l.AllowN(ctx, "k", 3)
		require.NoError(t, err)
		require.False(t, r.Allowed, "3 more do not fit in 2")
		assert.Equal(t, 2, r.Remaining)
		r, err = l.AllowN(ctx, "k", 2)
		require.NoError(t, err)
		assert.True(t, r.Allowed, "the refused 3 spent nothing")
	})
}

func TestConformanceRefund(t *testing.T) {
	t.Parallel()
	runAll(t, false, func(t *testing.T, mk func(int, time.Duration) (limiter.Limiter, func(time.Duration))) {
		l, _ := mk(2, time.Hour)
		ctx := context.Background()
		rf, ok := l.(limiter.Refunder)
		require.True(t, ok)
		for range 2 {
			r, err := l.AllowN(ctx, "k", 1)
			require.NoError(t, err)
			require.True(t, r.Allowed)
		}
		require.NoError(t, rf.RefundN(ctx, "k", 1))
		r, err := l.AllowN(ctx, "k", 1)
		require.NoError(t, err)
		assert.True(t, r.Allowed, "refunded event is available again")
		r, err = l.AllowN(ctx, "k", 1)
		require.NoError(t, err)
		assert.False(t, r.Allowed)
		// a refund never raises the budget above the limit
		require.NoError(t, rf.RefundN(ctx, "fresh", 5))
		r, err = l.AllowN(ctx, "fresh", 2)
		require.NoError(t, err)
		require.True(t, r.Allowed)
		r, err = l.AllowN(ctx, "fresh", 1)
		require.NoError(t, err)
		assert.False(t, r.Allowed)
	})
}

func TestConformanceConcurrentExact(t *testing.T) {
	t.Parallel()
	runAll(t, false, func(t *testing.T, mk func(int, time.Duration) (limiter.Limiter, func(time.Duration))) {
		l, _ := mk(50, time.Hour)
		var allowed atomic.Int64
		var wg sync.WaitGroup
		for g := range 20 {
			wg.Go(func() {
				for range 10 {
					r, err := l.AllowN(context.Background(), "hot", 1)
					if err != nil {
						t.Error(err)
						return
					}
					if r.Allowed {
						allowed.Add(1)
					}
				}
				_ = g
			})
		}
		wg.Wait()
		assert.Equal(t, int64(50), allowed.Load())
	})
}

func TestConformanceRetryAfterIsExact(t *testing.T) {
	t.Parallel()
	runAll(t, true, func(t *testing.T, mk func(int, time.Duration) (limiter.Limiter, func(time.Duration))) {
		l, advance := mk(4, time.Second)
		ctx := context.Background()
		for i := range 4 {
			if i == 2 {
				advance(100 * time.Millisecond)
			}
			r, err := l.AllowN(ctx, "k", 1)
			require.NoError(t, err)
			require.True(t, r.Allowed)
		}
		r, err := l.AllowN(ctx, "k", 1)
		require.NoError(t, err)
		require.False(t, r.Allowed)
		require.Greater(t, r.RetryAfter, time.Duration(0))
		advance(r.RetryAfter - time.Millisecond)
		r2, err := l.AllowN(ctx, "k", 1)
		require.NoError(t, err)
		assert.False(t, r2.Allowed, "1ms before RetryAfter")
		advance(time.Millisecond)
		r3, err := l.AllowN(ctx, "k", 1)
		require.NoError(t, err)
		assert.True(t, r3.Allowed, "at RetryAfter (%v)", r.RetryAfter)
	})
}

func TestConformanceFullAfterPeriod(t *testing.T) {
	t.Parallel()
	runAll(t, true, func(t *testing.T, mk func(int, time.Duration) (limiter.Limiter, func(time.Duration))) {
		l, advance := mk(3, time.Second)
		ctx := context.Background()
		for round := range 3 {
			r, err := l.AllowN(ctx, "k", 3)
			require.NoError(t, err)
			require.True(t, r.Allowed, "round %d", round)
			assert.Equal(t, time.Second, r.ResetAfter.Round(time.Millisecond))
			r, err = l.AllowN(ctx, "k", 1)
			require.NoError(t, err)
			require.False(t, r.Allowed)
			advance(time.Second)
		}
	})
}
