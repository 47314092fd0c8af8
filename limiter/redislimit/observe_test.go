package redislimit_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckillkit/seckill/internal/observe"
	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/seckillkit/seckill/limiter"
	"github.com/seckillkit/seckill/limiter/redislimit"
)

// recorder is an observe.Observer that keeps every event and the value of ctxKey
// in the context it was given.
type recorder struct {
	mu     sync.Mutex
	events []observe.Event
	ctxVal []any
}

type ctxKey struct{}

func (r *recorder) Observe(ctx context.Context, e observe.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
	r.ctxVal = append(r.ctxVal, ctx.Value(ctxKey{}))
}

func (r *recorder) take() ([]observe.Event, []any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, v := r.events, r.ctxVal
	r.events, r.ctxVal = nil, nil
	return e, v
}

// shape is what a test asserts of an event: everything but the measured
// Duration (asserted positive) and the error (asserted by errors.Is).
type shape struct{ stage, outcome, name string }

func shapes(t *testing.T, ev []observe.Event) []shape {
	t.Helper()
	out := make([]shape, len(ev))
	for i, e := range ev {
		assert.Positive(t, e.Duration, "event %d %+v", i, e)
		assert.False(t, e.Gauge)
		assert.Empty(t, e.Activity)
		if e.Outcome == "error" || e.Outcome == "key_error" {
			assert.Error(t, e.Err, "event %d", i)
		} else {
			assert.NoError(t, e.Err, "event %d", i)
		}
		out[i] = shape{e.Stage, e.Outcome, e.Name}
	}
	return out
}

func newRedisLimiter(t *testing.T, store string, c redis.Scripter, opts ...redislimit.Option) limiter.Limiter {
	t.Helper()
	opts = append([]redislimit.Option{redislimit.WithKeyPrefix(testenv.Prefix(t)), redislimit.WithName("buy")}, opts...)
	var l limiter.Limiter
	var err error
	if store == "slidingwindow" {
		l, err = redislimit.NewSlidingWindow(c, 2, time.Hour, opts...)
	} else {
		l, err = redislimit.NewBucket(c, limiter.Per(2, time.Hour), 2, opts...)
	}
	require.NoError(t, err)
	return l
}

// TestObserverAllow: allowed, refused and invalid decisions of both Redis
// limiters on every Redis kind, each reported once with the caller's ctx.
func TestObserverAllow(t *testing.T) {
	t.Parallel()
	for kind, c := range testenv.AllRedis(t) {
		for _, store := range []string{"slidingwindow", "redisbucket"} {
			t.Run(string(kind)+"/"+store, func(t *testing.T) {
				rec := &recorder{}
				l := newRedisLimiter(t, store, c, redislimit.WithObserver(rec))
				ctx := context.WithValue(context.Background(), ctxKey{}, "caller")
				var allowed []bool
				for range 3 {
					r, err := l.AllowN(ctx, "u1", 1)
					require.NoError(t, err)
					allowed = append(allowed, r.Allowed)
				}
				require.Equal(t, []bool{true, true, false}, allowed, "a limit of 2 per hour")
				_, err := l.AllowN(ctx, "u1", 3)
				require.ErrorIs(t, err, limiter.ErrInvalidArgument)
				ev, vals := rec.take()
				assert.Equal(t, []shape{
					{"limiter.allow", "ok", "buy"}, {"limiter.allow", "ok", "buy"},
					{"limiter.allow", "limited", "buy"}, {"limiter.allow", "error", "buy"},
				}, shapes(t, ev))
				assert.ErrorIs(t, ev[3].Err, limiter.ErrInvalidArgument)
				assert.Equal(t, []any{"caller", "caller", "caller", "caller"}, vals)
			})
		}
	}
}

// TestObserverFailurePolicies: a Redis failure is reported as the policy
// decided it.
func TestObserverFailurePolicies(t *testing.T) {
	t.Parallel()
	for _, store := range []string{"slidingwindow", "redisbucket"} {
		for _, tc := range []struct {
			policy limiter.FailurePolicy
			want   []string // outcomes of three calls while Redis is down
		}{
			{limiter.FailClosed, []string{"error", "error", "error"}},
			{limiter.FailOpen, []string{"fallback", "fallback", "fallback"}},
			{limiter.FallbackLocal, []string{"fallback", "fallback", "fallback_limited"}},
		} {
			t.Run(store+"/"+tc.policy.String(), func(t *testing.T) {
				t.Parallel()
				c, m := fastFailClient(t)
				rec := &recorder{}
				l := newRedisLimiter(t, store, c, redislimit.WithFailurePolicy(tc.policy), redislimit.WithObserver(rec))
				m.Close()
				var got []string
				for range 3 {
					_, _ = l.AllowN(context.Background(), "k", 1)
				}
				ev, _ := rec.take()
				for _, e := range shapes(t, ev) {
					assert.Equal(t, "buy", e.name)
					got = append(got, e.outcome)
				}
				assert.Equal(t, tc.want, got)
				if tc.policy == limiter.FailClosed {
					assert.ErrorIs(t, ev[0].Err, limiter.ErrUnavailable)
				}
			})
		}
	}
}

func TestObserverCallerCancel(t *testing.T) {
	t.Parallel()
	c, _ := testenv.Miniredis(t)
	rec := &recorder{}
	l := newRedisLimiter(t, "slidingwindow", c, redislimit.WithObserver(rec), redislimit.WithFailurePolicy(limiter.FailOpen))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := l.AllowN(ctx, "k", 1)
	require.ErrorIs(t, err, context.Canceled)
	ev, _ := rec.take()
	require.Equal(t, []shape{{"limiter.allow", "error", "buy"}}, shapes(t, ev))
	assert.ErrorIs(t, ev[0].Err, context.Canceled)
	assert.False(t, errors.Is(ev[0].Err, limiter.ErrUnavailable))
}

func TestObserverNilIgnored(t *testing.T) {
	t.Parallel()
	c, _ := testenv.Miniredis(t)
	l := newRedisLimiter(t, "redisbucket", c, redislimit.WithObserver(nil))
	r, err := l.AllowN(context.Background(), "k", 1)
	require.NoError(t, err)
	assert.True(t, r.Allowed)
}
