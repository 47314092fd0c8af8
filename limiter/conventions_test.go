package limiter_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckillkit/seckill/internal/lifecycle"
	"github.com/seckillkit/seckill/limiter"
)

// TestOptionsBelongToConstructor: an option implements the option
// interface of exactly the constructors that read it, so handing it to
// another one does not compile.
func TestOptionsBelongToConstructor(t *testing.T) {
	t.Parallel()
	type applies struct{ tb, keyed, mw bool }
	check := func(name string, opt any, want applies) {
		t.Helper()
		_, tb := opt.(limiter.TokenBucketOption)
		_, keyed := opt.(limiter.KeyedOption)
		_, mw := opt.(limiter.MiddlewareOption)
		assert.Equal(t, want, applies{tb, keyed, mw}, name)
	}
	check("WithClock", limiter.WithClock(nil), applies{tb: true, keyed: true})
	check("WithMaxKeys", limiter.WithMaxKeys(1), applies{keyed: true})
	check("WithShards", limiter.WithShards(1), applies{keyed: true})
	check("WithException", limiter.WithException("k", 1, 1), applies{keyed: true})
	for name, o := range map[string]any{
		"WithKeyFailurePolicy": limiter.WithKeyFailurePolicy(limiter.FailOpen),
		"WithOnError":          limiter.WithOnError(nil), "WithOnDenied": limiter.WithOnDenied(nil),
		"WithObserver": limiter.WithObserver(nil),
	} {
		check(name, o, applies{mw: true})
	}
	// Every option type is an interface whose methods are all unexported,
	// so options come from the With… functions only.
	for _, typ := range []reflect.Type{
		reflect.TypeFor[limiter.TokenBucketOption](), reflect.TypeFor[limiter.KeyedOption](),
		reflect.TypeFor[limiter.MiddlewareOption](), reflect.TypeFor[limiter.ClockOption](),
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
	_, err := limiter.NewTokenBucket(1, 1, nil, limiter.ClockOption(nil))
	require.NoError(t, err)
	k, err := limiter.NewKeyed(1, 1, nil, limiter.KeyedOption(nil), limiter.ClockOption(nil))
	require.NoError(t, err)
	r, err := k.AllowN(context.Background(), "k", 1)
	require.NoError(t, err)
	assert.True(t, r.Allowed)
	mw, err := limiter.NewMiddleware([]limiter.Rule{{Limiter: k}}, nil, limiter.MiddlewareOption(nil))
	require.NoError(t, err)
	assert.NotNil(t, mw)
}

// TestNilCollaborators: every constructor refuses a nil collaborator with
// ErrInvalidConfig, including a typed nil inside an interface.
func TestNilCollaborators(t *testing.T) {
	t.Parallel()
	var nilKeyed *limiter.Keyed
	for name, mk := range map[string]func() error{
		"TokenBucket nil clock": func() error { _, err := limiter.NewTokenBucket(1, 1, limiter.WithClock(nil)); return err },
		"Keyed typed nil clock": func() error {
			var nilCoarse *limiter.CoarseClock
			_, err := limiter.NewKeyed(1, 1, limiter.WithClock(nilCoarse))
			return err
		},
		"DryRun nil limiter":       func() error { _, err := limiter.NewDryRun(nil, nil); return err },
		"Priority nil bucket":      func() error { _, err := limiter.NewPriority(nil, limiter.PriorityClass{Name: "a"}); return err },
		"DryRun typed nil limiter": func() error { _, err := limiter.NewDryRun(nilKeyed, nil); return err },
		"Middleware typed nil limiter": func() error {
			_, err := limiter.NewMiddleware([]limiter.Rule{{Limiter: nilKeyed}})
			return err
		},
		"Middleware unknown key failure policy": func() error {
			_, err := limiter.NewMiddleware([]limiter.Rule{{Limiter: nilKeyedOK(t)}},
				limiter.WithKeyFailurePolicy(limiter.FailurePolicy(9)))
			return err
		},
	} {
		assert.ErrorIs(t, mk(), limiter.ErrInvalidConfig, name)
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

// TestCallbacksGetCallersCtx: the DryRun hook receives the ctx of the call
// that triggered it (the Redis limiters' WithOnFailure is tested in
// redislimit).
func TestCallbacksGetCallersCtx(t *testing.T) {
	t.Parallel()
	ctx := context.WithValue(context.Background(), ctxKey{}, "caller")
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
// invalid input and cancelled contexts never do (store failures: see
// redislimit's TestFailuresAreNotRefusals).
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
	_, notRefused["bad config"] = limiter.NewTokenBucket(-1, 1)
	for name, err := range notRefused {
		require.Error(t, err, name)
		assert.NotErrorIs(t, err, limiter.ErrRefused, name)
	}
	assert.ErrorIs(t, notRefused["bad n"], limiter.ErrInvalidArgument)
	assert.ErrorIs(t, notRefused["keyed bad n"], limiter.ErrInvalidArgument)
	assert.ErrorIs(t, notRefused["chain nil step"], limiter.ErrInvalidArgument)
	assert.ErrorIs(t, notRefused["cancelled ctx"], context.Canceled)
}
