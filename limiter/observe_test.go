package limiter_test

import (
	"context"
	"net/http"
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

// TestObserverNilIgnored: a nil observer is ignored by the middleware.
func TestObserverNilIgnored(t *testing.T) {
	t.Parallel()
	k, err := limiter.NewKeyed(1, 1)
	require.NoError(t, err)
	mw, err := limiter.NewMiddleware([]limiter.Rule{{Limiter: k}}, limiter.WithObserver(nil))
	require.NoError(t, err)
	assert.Equal(t, http.StatusNoContent, serve(mw(okHandler), "10.0.0.9:1", nil).Code)
}

// TestObserverMiddleware: one limiter.http event per request, named after
// the refusing or failing rule, reported before the next handler runs.
func TestObserverMiddleware(t *testing.T) {
	t.Parallel()
	c, _ := testenv.Miniredis(t)
	lim := newRedisLimiter(t, "slidingwindow", c)
	down, m := fastFailClient(t)
	broken := newRedisLimiter(t, "redisbucket", down)
	m.Close()
	rec := &recorder{}
	var inNext []int // events recorded when the next handler ran
	next := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		rec.mu.Lock()
		inNext = append(inNext, len(rec.events))
		rec.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
	mw, err := limiter.NewMiddleware([]limiter.Rule{{Name: "ip", Limiter: lim}, {Name: "user", Limiter: lim, Key: limiter.HeaderKey("X-User")}},
		limiter.WithObserver(rec))
	require.NoError(t, err)
	h := mw(next)
	u := func(name string) map[string]string { return map[string]string{"X-User": name} }
	// Both rules charge lim (2 per hour per key), ip first.
	assert.Equal(t, http.StatusNoContent, serve(h, "10.0.0.1:1", u("alice")).Code)
	assert.Equal(t, http.StatusNoContent, serve(h, "10.0.0.1:1", u("bob")).Code)
	assert.Equal(t, http.StatusTooManyRequests, serve(h, "10.0.0.1:1", u("carol")).Code, "ip spent 2 of 2")
	assert.Equal(t, http.StatusNoContent, serve(h, "10.0.0.2:1", u("alice")).Code)
	assert.Equal(t, http.StatusTooManyRequests, serve(h, "10.0.0.3:1", u("alice")).Code, "alice spent 2 of 2")
	assert.Equal(t, http.StatusInternalServerError, serve(h, "10.0.0.3:1", nil).Code, "no X-User: key error")

	mwDown, err := limiter.NewMiddleware([]limiter.Rule{{Name: "global", Limiter: broken, Key: limiter.ConstKey("all")}},
		limiter.WithObserver(rec))
	require.NoError(t, err)
	assert.Equal(t, http.StatusServiceUnavailable, serve(mwDown(next), "10.0.0.4:1", nil).Code)

	mwOpen, err := limiter.NewMiddleware([]limiter.Rule{{Name: "user", Limiter: lim, Key: limiter.HeaderKey("X-User")}},
		limiter.WithObserver(rec), limiter.WithKeyFailurePolicy(limiter.FailOpen))
	require.NoError(t, err)
	assert.Equal(t, http.StatusNoContent, serve(mwOpen(next), "10.0.0.5:1", nil).Code)

	ev, _ := rec.take()
	assert.Equal(t, []shape{
		{"limiter.http", "ok", ""}, {"limiter.http", "ok", ""}, {"limiter.http", "limited", "ip"},
		{"limiter.http", "ok", ""}, {"limiter.http", "limited", "user"},
		{"limiter.http", "key_error", "user"}, {"limiter.http", "error", "global"}, {"limiter.http", "ok", ""},
	}, shapes(t, ev))
	assert.ErrorIs(t, ev[5].Err, limiter.ErrInvalidArgument)
	assert.ErrorIs(t, ev[6].Err, limiter.ErrUnavailable)
	assert.Equal(t, []int{1, 2, 4, 8}, inNext, "each ok was reported before next ran")
}
