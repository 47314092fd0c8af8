package limiter_test

import (
	"context"
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
	type applies struct{ tb, keyed, sw, rb bool }
	check := func(name string, opt any, want applies) {
		t.Helper()
		_, tb := opt.(limiter.TokenBucketOption)
		_, keyed := opt.(limiter.KeyedOption)
		_, sw := opt.(limiter.SlidingWindowOption)
		_, rb := opt.(limiter.RedisBucketOption)
		assert.Equal(t, want, applies{tb, keyed, sw, rb}, name)
	}
	all := applies{true, true, true, true}
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
}

// TestNilOptionIgnored: a nil option, untyped or typed, changes nothing.
func TestNilOptionIgnored(t *testing.T) {
	t.Parallel()
	c, _ := testenv.Miniredis(t)
	_, err := limiter.NewTokenBucket(1, 1, nil, limiter.ClockOption(nil))
	require.NoError(t, err)
	k, err := limiter.NewKeyed(1, 1, nil, limiter.KeyedOnlyOption(nil), limiter.ClockOption(nil))
	require.NoError(t, err)
	r, err := k.AllowN(context.Background(), "k", 1)
	require.NoError(t, err)
	assert.True(t, r.Allowed)
	sw, err := limiter.NewSlidingWindow(c, 1, time.Hour, nil, limiter.RedisOption(nil),
		limiter.WithKeyPrefix(testenv.Prefix(t)))
	require.NoError(t, err)
	r, err = sw.Allow(context.Background(), "k")
	require.NoError(t, err)
	assert.True(t, r.Allowed)
	_, err = limiter.NewRedisBucket(c, 1, 1, nil, limiter.RedisOption(nil))
	require.NoError(t, err)
	mw, err := limiter.NewMiddleware([]limiter.Rule{{Limiter: k}}, nil)
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
			assert.Equal(t, []string{limiter.OutcomeFallback, limiter.OutcomeFallback, limiter.OutcomeFallbackLimited}, outcomes)
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
