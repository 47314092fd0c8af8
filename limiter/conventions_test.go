package limiter_test

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

	"github.com/seckillkit/seckill/internal/lifecycle"
	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/seckillkit/seckill/limiter"
	"github.com/seckillkit/seckill/observe"
)

// TestOptionsBelongToConstructor: an option implements the option
// interface of exactly the constructors that read it, so handing it to
// another one does not compile.
func TestOptionsBelongToConstructor(t *testing.T) {
	t.Parallel()
	type applies struct{ tb, keyed, sw, rb, mw bool }
	check := func(name string, opt any, want applies) {
		t.Helper()
		_, tb := opt.(limiter.TokenBucketOption)
		_, keyed := opt.(limiter.KeyedOption)
		_, sw := opt.(limiter.SlidingWindowOption)
		_, rb := opt.(limiter.RedisBucketOption)
		_, mw := opt.(limiter.MiddlewareOption)
		assert.Equal(t, want, applies{tb, keyed, sw, rb, mw}, name)
	}
	all := applies{true, true, true, true, false}
	redisOnly := applies{sw: true, rb: true}
	check("WithClock", limiter.WithClock(nil), all)
	check("WithMaxKeys", limiter.WithMaxKeys(1), applies{keyed: true})
	check("WithShards", limiter.WithShards(1), applies{keyed: true})
	for name, o := range map[string]any{
		"WithKeyPrefix": limiter.WithKeyPrefix("p"), "WithName": limiter.WithName("n"),
		"WithFailurePolicy": limiter.WithFailurePolicy(limiter.FailOpen),
		"WithFallback":      limiter.WithFallback(nil), "WithOnFailure": limiter.WithOnFailure(nil),
		"WithObserver": limiter.WithObserver(nil), "WithLogger": limiter.WithLogger(nil),
		"WithBatching": limiter.WithBatching(0),
	} {
		check(name, o, redisOnly)
	}
	for name, o := range map[string]any{
		"WithKeyFailurePolicy": limiter.WithKeyFailurePolicy(limiter.FailOpen),
		"WithOnError":          limiter.WithOnError(nil), "WithOnDenied": limiter.WithOnDenied(nil),
		"WithMiddlewareObserver": limiter.WithMiddlewareObserver(nil),
	} {
		check(name, o, applies{mw: true})
	}
	// Every option type is an interface whose methods are all unexported,
	// so options come from the With… functions only.
	for _, typ := range []reflect.Type{
		reflect.TypeFor[limiter.TokenBucketOption](), reflect.TypeFor[limiter.KeyedOption](),
		reflect.TypeFor[limiter.SlidingWindowOption](), reflect.TypeFor[limiter.RedisBucketOption](),
		reflect.TypeFor[limiter.MiddlewareOption](), reflect.TypeFor[limiter.ClockOption](),
		reflect.TypeFor[limiter.RedisOption](),
	} {
		require.Equal(t, reflect.Interface, typ.Kind(), typ.Name())
		for i := range typ.NumMethod() {
			assert.False(t, typ.Method(i).IsExported(), "%s.%s", typ.Name(), typ.Method(i).Name)
		}
	}
}

// TestNilOptionIgnored: a nil option, untyped or typed, changes nothing.
func TestNilOptionIgnored(t *testing.T) {
	t.Parallel()
	c, _ := testenv.Miniredis(t)
	_, err := limiter.NewTokenBucket(1, 1, nil, limiter.ClockOption(nil))
	require.NoError(t, err)
	k, err := limiter.NewKeyed(1, 1, nil, limiter.KeyedOption(nil), limiter.ClockOption(nil))
	require.NoError(t, err)
	r, err := k.AllowN(context.Background(), "k", 1)
	require.NoError(t, err)
	assert.True(t, r.Allowed)
	sw, err := limiter.NewSlidingWindow(c, 1, time.Hour, nil, limiter.RedisOption(nil),
		limiter.WithKeyPrefix(testenv.Prefix(t)))
	require.NoError(t, err)
	r, err = sw.AllowN(context.Background(), "k", 1)
	require.NoError(t, err)
	assert.True(t, r.Allowed)
	_, err = limiter.NewRedisBucket(c, 1, 1, nil, limiter.RedisOption(nil))
	require.NoError(t, err)
	mw, err := limiter.NewMiddleware([]limiter.Rule{{Limiter: k}}, nil, limiter.MiddlewareOption(nil))
	require.NoError(t, err)
	assert.NotNil(t, mw)
}

// TestNilCollaborators: every constructor refuses a nil collaborator with
// ErrInvalidConfig, including a typed nil inside an interface.
func TestNilCollaborators(t *testing.T) {
	t.Parallel()
	c, _ := testenv.Miniredis(t)
	var nilClient *redis.Client
	var nilKeyed *limiter.Keyed
	for name, mk := range map[string]func() error{
		"SlidingWindow nil client": func() error { _, err := limiter.NewSlidingWindow(nil, 1, time.Second); return err },
		"SlidingWindow typed nil client": func() error {
			_, err := limiter.NewSlidingWindow(nilClient, 1, time.Second)
			return err
		},
		"RedisBucket nil client":       func() error { _, err := limiter.NewRedisBucket(nil, 1, 1); return err },
		"RedisBucket typed nil client": func() error { _, err := limiter.NewRedisBucket(nilClient, 1, 1); return err },
		"SlidingWindow nil fallback": func() error {
			_, err := limiter.NewSlidingWindow(c, 1, time.Second,
				limiter.WithFailurePolicy(limiter.FallbackLocal), limiter.WithFallback(nil))
			return err
		},
		"RedisBucket typed nil fallback": func() error {
			_, err := limiter.NewRedisBucket(c, 1, 1,
				limiter.WithFailurePolicy(limiter.FallbackLocal), limiter.WithFallback(nilKeyed))
			return err
		},
		"TokenBucket nil clock": func() error { _, err := limiter.NewTokenBucket(1, 1, limiter.WithClock(nil)); return err },
		"Keyed typed nil clock": func() error {
			var nilCoarse *limiter.CoarseClock
			_, err := limiter.NewKeyed(1, 1, limiter.WithClock(nilCoarse))
			return err
		},
		"SlidingWindow nil clock": func() error {
			_, err := limiter.NewSlidingWindow(c, 1, time.Second, limiter.WithClock(nil))
			return err
		},
		"RedisBucket nil clock":    func() error { _, err := limiter.NewRedisBucket(c, 1, 1, limiter.WithClock(nil)); return err },
		"DryRun nil limiter":       func() error { _, err := limiter.NewDryRun(nil, nil); return err },
		"DryRun typed nil limiter": func() error { _, err := limiter.NewDryRun(nilKeyed, nil); return err },
		"Middleware typed nil limiter": func() error {
			_, err := limiter.NewMiddleware([]limiter.Rule{{Limiter: nilKeyed}})
			return err
		},
		"SlidingWindow nil logger": func() error {
			_, err := limiter.NewSlidingWindow(c, 1, time.Second, limiter.WithLogger(nil))
			return err
		},
		"RedisBucket nil logger": func() error { _, err := limiter.NewRedisBucket(c, 1, 1, limiter.WithLogger(nil)); return err },
		"Middleware unknown key failure policy": func() error {
			_, err := limiter.NewMiddleware([]limiter.Rule{{Limiter: nilKeyedOK(t)}},
				limiter.WithKeyFailurePolicy(limiter.FailurePolicy(9)))
			return err
		},
	} {
		assert.ErrorIs(t, mk(), limiter.ErrInvalidConfig, name)
	}
}

// TestFallbackIsReportedNotAnError: under FallbackLocal a Redis failure is
// decided by the fallback with a nil error, and the caller can see it
// happened: Result.Degraded, the observer's "fallback" outcome, and the
// fallback limiter's own budget spent.
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
			opts := []limiter.RedisOption{limiter.WithKeyPrefix(testenv.Prefix(t)),
				limiter.WithFailurePolicy(limiter.FallbackLocal), limiter.WithFallback(fb), limiter.WithObserver(obs)}
			var l limiter.Limiter
			if store == "slidingwindow" {
				l, err = limiter.NewSlidingWindow(c, 5, time.Hour, asOptions[limiter.SlidingWindowOption](opts)...)
			} else {
				l, err = limiter.NewRedisBucket(c, limiter.Per(5, time.Hour), 5, asOptions[limiter.RedisBucketOption](opts)...)
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
func TestCoarseClockLifecycleSentinels(t *testing.T) {
	t.Parallel()
	c := limiter.NewCoarseClock(time.Millisecond)
	ran := make(chan error, 2)
	for range 2 { // one of them runs until Close; the other must be refused
		go func() { ran <- c.Run(context.Background()) }()
	}
	first := <-ran
	require.ErrorIs(t, first, lifecycle.ErrRunning)
	require.ErrorIs(t, first, limiter.ErrRunning)
	require.NoError(t, c.Close())
	require.NoError(t, <-ran)
	err := c.Run(context.Background())
	require.ErrorIs(t, err, lifecycle.ErrClosed)
	require.ErrorIs(t, err, limiter.ErrClosed)
}

func nilKeyedOK(t *testing.T) *limiter.Keyed {
	k, err := limiter.NewKeyed(1, 1)
	require.NoError(t, err)
	return k
}

// TestCallbacksGetCallersCtx: WithOnFailure (AllowN, RefundN, and a Chain's
// refund) and the DryRun hook receive the ctx of the call that triggered
// them.
func TestCallbacksGetCallersCtx(t *testing.T) {
	t.Parallel()
	down := fakeScripter{err: errors.New("redis down")}
	ctx := context.WithValue(context.Background(), ctxKey{}, "caller")
	var seen []any
	hook := limiter.WithOnFailure(func(ctx context.Context, key string, err error) {
		assert.ErrorIs(t, err, limiter.ErrUnavailable)
		seen = append(seen, ctx.Value(ctxKey{}))
	})
	sw, err := limiter.NewSlidingWindow(down, 5, time.Second, hook, limiter.WithBatching(0),
		limiter.WithFailurePolicy(limiter.FailOpen), limiter.WithLogger(slog.New(slog.DiscardHandler)))
	require.NoError(t, err)
	rb, err := limiter.NewRedisBucket(down, 5, 5, hook, limiter.WithBatching(0),
		limiter.WithLogger(slog.New(slog.DiscardHandler)))
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

	var dry []any
	d, err := limiter.NewDryRun(limiterFunc(func(context.Context, string, int) (limiter.Result, error) {
		return limiter.Result{}, nil
	}), func(ctx context.Context, _ string, _ limiter.Result, _ error) { dry = append(dry, ctx.Value(ctxKey{})) })
	require.NoError(t, err)
	_, err = d.AllowN(ctx, "k", 1)
	require.NoError(t, err)
	assert.Equal(t, []any{"caller"}, dry)
}

// TestOnlyRefusalsAreRefused: every refusal that is an error matches
// ErrRefused (a quota that cannot cover n, a wait past the deadline);
// invalid input, store failures and cancelled contexts never do.
func TestOnlyRefusalsAreRefused(t *testing.T) {
	t.Parallel()
	quota, err := limiter.NewTokenBucket(0, 1)
	require.NoError(t, err)
	require.True(t, quota.Allow())
	err = quota.Wait(context.Background())
	assert.ErrorIs(t, err, limiter.ErrRefused, "quota exhausted")

	clk := newWallFakeClock()
	slow, err := limiter.NewTokenBucket(limiter.Every(time.Hour), 1, limiter.WithClock(clk))
	require.NoError(t, err)
	require.True(t, slow.Allow())
	dctx, cancel := context.WithDeadline(context.Background(), clk.Now().Add(time.Minute))
	defer cancel()
	err = slow.Wait(dctx)
	assert.ErrorIs(t, err, limiter.ErrWouldExceedDeadline)
	assert.ErrorIs(t, err, limiter.ErrRefused, "a wait past the deadline is a refusal")
	assert.ErrorIs(t, err, context.DeadlineExceeded)

	notRefused := map[string]error{}
	notRefused["bad n"] = slow.WaitN(context.Background(), 2)
	cctx, ccancel := context.WithCancel(context.Background())
	ccancel()
	notRefused["cancelled ctx"] = slow.Wait(cctx)
	k, err := limiter.NewKeyed(1, 1)
	require.NoError(t, err)
	_, notRefused["keyed bad n"] = k.AllowN(context.Background(), "k", 0)
	_, notRefused["chain nil step"] = func() (limiter.Result, error) {
		r, _, err := limiter.Chain(context.Background(), 1, limiter.Step{})
		return r, err
	}()
	rb, err := limiter.NewRedisBucket(fakeScripter{err: errors.New("redis down")}, 1, 1, limiter.WithBatching(0),
		limiter.WithLogger(slog.New(slog.DiscardHandler)))
	require.NoError(t, err)
	_, notRefused["redis down"] = rb.AllowN(context.Background(), "k", 1)
	_, notRefused["redis caller cancelled"] = rb.AllowN(cctx, "k", 1)
	_, notRefused["bad config"] = limiter.NewTokenBucket(-1, 1)
	for name, err := range notRefused {
		require.Error(t, err, name)
		assert.NotErrorIs(t, err, limiter.ErrRefused, name)
	}
	assert.ErrorIs(t, notRefused["bad n"], limiter.ErrInvalidArgument)
	assert.ErrorIs(t, notRefused["keyed bad n"], limiter.ErrInvalidArgument)
	assert.ErrorIs(t, notRefused["chain nil step"], limiter.ErrInvalidArgument)
	assert.ErrorIs(t, notRefused["redis down"], limiter.ErrUnavailable)
	assert.ErrorIs(t, notRefused["cancelled ctx"], context.Canceled)
}
