package redislimit_test

import (
	"context"
	"errors"
	"log/slog"
	"reflect"
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

// TestOptionIsSealed: Option is an interface whose methods are all
// unexported, so options come from the With… functions only, and both
// constructors accept every one of them.
func TestOptionIsSealed(t *testing.T) {
	t.Parallel()
	typ := reflect.TypeFor[redislimit.Option]()
	require.Equal(t, reflect.Interface, typ.Kind())
	for i := range typ.NumMethod() {
		assert.False(t, typ.Method(i).IsExported(), "Option.%s", typ.Method(i).Name)
	}
	c, _ := testenv.Miniredis(t)
	opts := []redislimit.Option{redislimit.WithKeyPrefix(testenv.Prefix(t)), redislimit.WithName("n"),
		redislimit.WithFailurePolicy(limiter.FailOpen), redislimit.WithOnFailure(nil),
		redislimit.WithObserver(nil), redislimit.WithLogger(slog.New(slog.DiscardHandler)),
		redislimit.WithBatching(0), redislimit.WithException("k", 1)}
	_, err := redislimit.NewSlidingWindow(c, 1, time.Second, opts...)
	require.NoError(t, err)
	_, err = redislimit.NewBucket(c, 1, 1, opts...)
	require.NoError(t, err)
}

// TestNilOptionIgnored: a nil option, untyped or typed, changes nothing.
func TestNilOptionIgnored(t *testing.T) {
	t.Parallel()
	c, _ := testenv.Miniredis(t)
	sw, err := redislimit.NewSlidingWindow(c, 1, time.Hour, nil, redislimit.Option(nil),
		redislimit.WithKeyPrefix(testenv.Prefix(t)))
	require.NoError(t, err)
	r, err := sw.AllowN(context.Background(), "k", 1)
	require.NoError(t, err)
	assert.True(t, r.Allowed)
	_, err = redislimit.NewBucket(c, 1, 1, nil, redislimit.Option(nil))
	require.NoError(t, err)
}

// TestNilCollaborators: both constructors refuse a nil collaborator with
// limiter.ErrInvalidConfig, including a typed nil inside an interface.
func TestNilCollaborators(t *testing.T) {
	t.Parallel()
	c, _ := testenv.Miniredis(t)
	var nilClient *redis.Client
	var nilKeyed *limiter.Keyed
	for name, mk := range map[string]func() error{
		"SlidingWindow nil client": func() error { _, err := redislimit.NewSlidingWindow(nil, 1, time.Second); return err },
		"SlidingWindow typed nil client": func() error {
			_, err := redislimit.NewSlidingWindow(nilClient, 1, time.Second)
			return err
		},
		"Bucket nil client":       func() error { _, err := redislimit.NewBucket(nil, 1, 1); return err },
		"Bucket typed nil client": func() error { _, err := redislimit.NewBucket(nilClient, 1, 1); return err },
		"SlidingWindow nil fallback": func() error {
			_, err := redislimit.NewSlidingWindow(c, 1, time.Second,
				redislimit.WithFailurePolicy(limiter.FallbackLocal), redislimit.WithFallback(nil))
			return err
		},
		"Bucket typed nil fallback": func() error {
			_, err := redislimit.NewBucket(c, 1, 1,
				redislimit.WithFailurePolicy(limiter.FallbackLocal), redislimit.WithFallback(nilKeyed))
			return err
		},
		"SlidingWindow nil logger": func() error {
			_, err := redislimit.NewSlidingWindow(c, 1, time.Second, redislimit.WithLogger(nil))
			return err
		},
		"Bucket nil logger": func() error { _, err := redislimit.NewBucket(c, 1, 1, redislimit.WithLogger(nil)); return err },
		"Bucket unknown failure policy": func() error {
			_, err := redislimit.NewBucket(c, 1, 1, redislimit.WithFailurePolicy(limiter.FailurePolicy(9)))
			return err
		},
	} {
		assert.ErrorIs(t, mk(), limiter.ErrInvalidConfig, name)
	}
}

func TestFallbackIsReportedNotAnError(t *testing.T) {
	t.Parallel()
	for _, store := range []string{"slidingwindow", "redisbucket"} {
		t.Run(store, func(t *testing.T) {
			t.Parallel()
			c, m := fastFailClient(t)
			fb, err := limiter.NewKeyed(limiter.Every(time.Hour), 2) // no refill between the calls
			require.NoError(t, err)
			var mu sync.Mutex
			var outcomes []string
			obs := observe.Func(func(_ context.Context, e observe.Event) {
				mu.Lock()
				outcomes = append(outcomes, e.Outcome)
				mu.Unlock()
			})
			opts := []redislimit.Option{redislimit.WithKeyPrefix(testenv.Prefix(t)),
				redislimit.WithFailurePolicy(limiter.FallbackLocal), redislimit.WithFallback(fb), redislimit.WithObserver(obs)}
			var l limiter.Limiter
			if store == "slidingwindow" {
				l, err = redislimit.NewSlidingWindow(c, 5, time.Hour, opts...)
			} else {
				l, err = redislimit.NewBucket(c, limiter.Per(5, time.Hour), 5, opts...)
			}
			require.NoError(t, err)
			m.Close()
			r, err := l.AllowN(context.Background(), "u1", 1)
			require.NoError(t, err, "the fallback decides: no error")
			assert.True(t, r.Allowed)
			assert.True(t, r.Degraded, "Result.Degraded reports the fallback")
			assert.Equal(t, 2, r.Limit, "the fallback's limit, not Redis's")
			r, err = l.AllowN(context.Background(), "u1", 1)
			require.NoError(t, err)
			assert.True(t, r.Allowed && r.Degraded)
			r, err = l.AllowN(context.Background(), "u1", 1)
			require.NoError(t, err)
			assert.False(t, r.Allowed, "the fallback's budget of 2 is spent")
			assert.True(t, r.Degraded)
			// The fallback's own state: nothing left for u1.
			fr, err := fb.AllowN(context.Background(), "u1", 1)
			require.NoError(t, err)
			assert.False(t, fr.Allowed)
			mu.Lock()
			defer mu.Unlock()
			assert.Equal(t, []string{"fallback", "fallback", "fallback_limited"}, outcomes)
		})
	}
}

// TestCoarseClockLifecycleSentinels: a second Run reports the shared
// "already running" sentinel and a Run after Close the shared "closed" one,
// so one errors.Is works across seckill packages.

// limiterFunc adapts a function to limiter.Limiter (a stub for tests).
type limiterFunc func(ctx context.Context, key string, n int) (limiter.Result, error)

func (f limiterFunc) AllowN(ctx context.Context, key string, n int) (limiter.Result, error) {
	return f(ctx, key, n)
}

// TestCallbacksGetCallersCtx: WithOnFailure (AllowN, RefundN, and a Chain's
// refund) receives the ctx of the call that triggered it.
func TestCallbacksGetCallersCtx(t *testing.T) {
	t.Parallel()
	down := fakeScripter{err: errors.New("redis down")}
	ctx := context.WithValue(context.Background(), ctxKey{}, "caller")
	var seen []any
	hook := redislimit.WithOnFailure(func(ctx context.Context, key string, err error) {
		assert.ErrorIs(t, err, limiter.ErrUnavailable)
		seen = append(seen, ctx.Value(ctxKey{}))
	})
	sw, err := redislimit.NewSlidingWindow(down, 5, time.Second, hook, redislimit.WithBatching(0),
		redislimit.WithFailurePolicy(limiter.FailOpen), redislimit.WithLogger(slog.New(slog.DiscardHandler)))
	require.NoError(t, err)
	rb, err := redislimit.NewBucket(down, 5, 5, hook, redislimit.WithBatching(0),
		redislimit.WithLogger(slog.New(slog.DiscardHandler)))
	require.NoError(t, err)

	r, err := sw.AllowN(ctx, "k", 1)
	require.NoError(t, err)
	require.True(t, r.Degraded)
	_, err = rb.AllowN(ctx, "k", 1)
	require.ErrorIs(t, err, limiter.ErrUnavailable)
	require.ErrorIs(t, sw.RefundN(ctx, "k", 1), limiter.ErrUnavailable)
	require.ErrorIs(t, rb.RefundN(ctx, "k", 1), limiter.ErrUnavailable)
	// The fail-open window allows (and "spends"), the refusing step after
	// it makes Chain refund it: that refund fails and reports the Chain ctx.
	cctx, cancel := context.WithCancel(ctx)
	_, idx, _ := limiter.Chain(cctx, 1, limiter.Step{Limiter: sw, Key: "k"},
		limiter.Step{Limiter: limiterFunc(func(context.Context, string, int) (limiter.Result, error) {
			cancel()
			return limiter.Result{}, nil
		}), Key: "k"})
	require.Equal(t, 1, idx)
	assert.Equal(t, []any{"caller", "caller", "caller", "caller", "caller", "caller"}, seen,
		"AllowN x2, RefundN x2, the chain's AllowN and its refund")
}

// TestFailuresAreNotRefusals: a Redis failure, a bad reply and a caller
// that gave up never match limiter.ErrRefused.
func TestFailuresAreNotRefusals(t *testing.T) {
	t.Parallel()
	rb, err := redislimit.NewBucket(fakeScripter{err: errors.New("redis down")}, 1, 1, redislimit.WithBatching(0),
		redislimit.WithLogger(slog.New(slog.DiscardHandler)))
	require.NoError(t, err)
	bad, err := redislimit.NewSlidingWindow(fakeScripter{reply: "OK"}, 1, time.Second,
		redislimit.WithLogger(slog.New(slog.DiscardHandler)))
	require.NoError(t, err)
	c, _ := testenv.Miniredis(t)
	up, err := redislimit.NewBucket(c, 1, 1, redislimit.WithKeyPrefix(testenv.Prefix(t)))
	require.NoError(t, err)
	cctx, cancel := context.WithCancel(context.Background())
	cancel()
	errs := map[string]error{}
	_, errs["redis down"] = rb.AllowN(context.Background(), "k", 1)
	_, errs["bad reply"] = bad.AllowN(context.Background(), "k", 1)
	_, errs["caller cancelled"] = up.AllowN(cctx, "k", 1)
	_, errs["bad n"] = rb.AllowN(context.Background(), "k", 2)
	for name, err := range errs {
		require.Error(t, err, name)
		assert.NotErrorIs(t, err, limiter.ErrRefused, name)
	}
	assert.ErrorIs(t, errs["redis down"], limiter.ErrUnavailable)
	assert.ErrorIs(t, errs["bad reply"], redislimit.ErrBadReply)
	assert.ErrorIs(t, errs["caller cancelled"], context.Canceled)
	assert.ErrorIs(t, errs["bad n"], limiter.ErrInvalidArgument)
}
