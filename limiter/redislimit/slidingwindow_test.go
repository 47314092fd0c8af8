package redislimit_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/seckillkit/seckill/limiter"
	"github.com/seckillkit/seckill/limiter/redislimit"
)

// t0 is the instant miniredis TIME is frozen at (SetTime). Every clock it
// meets is fake: miniredis TTLs only move with FastForward.
var t0 = testenv.Epoch()

func newWindow(t *testing.T, limit int, window time.Duration, opts ...redislimit.Option) (*redislimit.SlidingWindow, *miniredis.Miniredis, func(time.Time)) {
	t.Helper()
	c, m := testenv.Miniredis(t)
	m.SetTime(t0)
	set := func(at time.Time) { m.SetTime(at) }
	opts = append([]redislimit.Option{redislimit.WithKeyPrefix(testenv.Prefix(t))}, opts...)
	l, err := redislimit.NewSlidingWindow(c, limit, window, opts...)
	require.NoError(t, err)
	return l, m, set
}

func TestNewSlidingWindowValidation(t *testing.T) {
	t.Parallel()
	c, _ := testenv.Miniredis(t)
	cases := []struct {
		name   string
		rdb    redis.Scripter
		limit  int
		window time.Duration
		opts   []redislimit.Option
	}{
		{"nil client", nil, 1, time.Second, nil},
		{"zero limit", c, 0, time.Second, nil},
		{"negative limit", c, -3, time.Second, nil},
		{"huge limit", c, 1 << 21, time.Second, nil},
		{"zero window", c, 1, 0, nil},
		{"sub-ms window", c, 1, time.Microsecond, nil},
		{"bad policy", c, 1, time.Second, []redislimit.Option{redislimit.WithFailurePolicy(limiter.FailurePolicy(42))}},
		{"empty name", c, 1, time.Second, []redislimit.Option{redislimit.WithName("")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l, err := redislimit.NewSlidingWindow(tc.rdb, tc.limit, tc.window, tc.opts...)
			require.ErrorIs(t, err, limiter.ErrInvalidConfig)
			require.Nil(t, l)
		})
	}
	_, err := redislimit.NewBucket(nil, 1, 1)
	require.ErrorIs(t, err, limiter.ErrInvalidConfig)
	for _, r := range []limiter.Limit{0, -1, limiter.Inf} {
		_, err := redislimit.NewBucket(c, r, 1)
		require.ErrorIs(t, err, limiter.ErrInvalidConfig, "rate %v", r)
	}
	_, err = redislimit.NewBucket(c, 1, 0)
	require.ErrorIs(t, err, limiter.ErrInvalidConfig)
}

// TestSlidingWindowBoundary: a fixed window would allow limit at the end of
// one window and limit again at the start of the next (2× within a
// fraction of a second). The sliding log must not.
func TestSlidingWindowBoundary(t *testing.T) {
	t.Parallel()
	l, _, set := newWindow(t, 10, time.Second)
	ctx := context.Background()
	steps := []struct {
		at      time.Duration // since t0
		n       int
		allowed bool
		retry   time.Duration
	}{
		{999 * time.Millisecond, 10, true, 0},                       // limit at the very end of "window 0"
		{1000 * time.Millisecond, 1, false, 999 * time.Millisecond}, // boundary of a fixed window: still refused
		{1001 * time.Millisecond, 1, false, 998 * time.Millisecond},
		{1998 * time.Millisecond, 1, false, time.Millisecond}, // the 10 events are 999ms old
		{1999 * time.Millisecond, 10, true, 0},                // exactly one window later they are out
		{2500 * time.Millisecond, 1, false, 499 * time.Millisecond},
		{2999 * time.Millisecond, 1, true, 0},
	}
	for i, s := range steps {
		set(t0.Add(s.at))
		r, err := l.AllowN(ctx, "u", s.n)
		require.NoError(t, err)
		assert.Equal(t, s.allowed, r.Allowed, "step %d at %v", i, s.at)
		assert.Equal(t, s.retry, r.RetryAfter, "step %d retry", i)
	}
}

// TestSlidingWindowNeverExceedsLimitInAnyWindow drives random arrivals and
// checks the allowed timestamps: every window of the configured length
// holds at most limit of them.
func TestSlidingWindowNeverExceedsLimitInAnyWindow(t *testing.T) {
	t.Parallel()
	const limit = 7
	window := 500 * time.Millisecond
	l, _, set := newWindow(t, limit, window)
	rng := rand.New(rand.NewPCG(1, 2))
	at := time.Duration(0)
	var allowed []time.Duration
	for range 500 {
		at += time.Duration(rng.IntN(40_000)) * time.Microsecond
		set(t0.Add(at))
		n := 1 + rng.IntN(2)
		r, err := l.AllowN(context.Background(), "u", n)
		require.NoError(t, err)
		if r.Allowed {
			for range n {
				allowed = append(allowed, at)
			}
		}
	}
	require.Greater(t, len(allowed), 50)
	sort.Slice(allowed, func(i, j int) bool { return allowed[i] < allowed[j] })
	for i := range allowed {
		// events in (allowed[i]-window, allowed[i]]
		j := sort.Search(len(allowed), func(k int) bool { return allowed[k] > allowed[i]-window })
		require.LessOrEqual(t, i-j+1, limit, "window ending at %v", allowed[i])
	}
}

func TestSlidingWindowResultFields(t *testing.T) {
	t.Parallel()
	l, _, set := newWindow(t, 3, 10*time.Second)
	ctx := context.Background()
	set(t0)
	r, err := l.AllowN(ctx, "u", 1)
	require.NoError(t, err)
	assert.Equal(t, limiter.Result{Allowed: true, Limit: 3, Remaining: 2, ResetAfter: 10 * time.Second}, r)
	set(t0.Add(2 * time.Second))
	_, err = l.AllowN(ctx, "u", 2)
	require.NoError(t, err)
	set(t0.Add(3 * time.Second))
	r, err = l.AllowN(ctx, "u", 1)
	require.NoError(t, err)
	assert.Equal(t, limiter.Result{Allowed: false, Limit: 3, Remaining: 0, RetryAfter: 7 * time.Second, ResetAfter: 9 * time.Second}, r)
	// needing 2 means waiting for the two oldest to leave (t0+2s + 10s)
	r, err = l.AllowN(ctx, "u", 2)
	require.NoError(t, err)
	assert.Equal(t, 9*time.Second, r.RetryAfter)
}

func TestSlidingWindowKeysShareOneTagAndExpire(t *testing.T) {
	t.Parallel()
	l, m, _ := newWindow(t, 3, time.Second, redislimit.WithName("user"))
	_, err := l.AllowN(context.Background(), "42", 1)
	require.NoError(t, err)
	keys := m.Keys()
	require.Len(t, keys, 1)
	k := keys[0]
	assert.True(t, strings.HasSuffix(k, "{sw:user:42}"), k)
	assert.Positive(t, m.TTL(k))
	assert.LessOrEqual(t, m.TTL(k), 1100*time.Millisecond)
	m.FastForward(2 * time.Second)
	assert.False(t, m.Exists(k), "idle log expires")
}

// fakeScripter returns a fixed reply for every script.
type fakeScripter struct {
	redis.Scripter
	reply any
	err   error
}

func (f fakeScripter) cmd(ctx context.Context) *redis.Cmd {
	c := redis.NewCmd(ctx)
	if f.err != nil {
		c.SetErr(f.err)
	} else {
		c.SetVal(f.reply)
	}
	return c
}

func (f fakeScripter) EvalSha(ctx context.Context, _ string, _ []string, _ ...any) *redis.Cmd {
	return f.cmd(ctx)
}

func (f fakeScripter) Eval(ctx context.Context, _ string, _ []string, _ ...any) *redis.Cmd {
	return f.cmd(ctx)
}

func TestRedisLimitersRejectBadReplies(t *testing.T) {
	t.Parallel()
	replies := []any{
		"OK", int64(1), []any{int64(1)}, []any{int64(1), "x", int64(0), int64(0)},
		[]any{int64(1), int64(2), int64(3), nil}, nil,
	}
	for _, rep := range replies {
		sc := fakeScripter{reply: rep}
		sw, err := redislimit.NewSlidingWindow(sc, 5, time.Second)
		require.NoError(t, err)
		rb, err := redislimit.NewBucket(sc, 5, 5)
		require.NoError(t, err)
		for _, l := range []limiter.Limiter{sw, rb} {
			r, err := l.AllowN(context.Background(), "k", 1)
			require.ErrorIs(t, err, redislimit.ErrBadReply, "%#v", rep)
			require.ErrorIs(t, err, limiter.ErrUnavailable)
			assert.False(t, r.Allowed)
		}
	}
}

func TestRedisFailurePolicies(t *testing.T) {
	t.Parallel()
	type mk func(c redis.Scripter, opts ...redislimit.Option) (limiter.Limiter, error)
	makers := map[string]mk{
		"slidingwindow": func(c redis.Scripter, opts ...redislimit.Option) (limiter.Limiter, error) {
			return redislimit.NewSlidingWindow(c, 2, time.Hour, opts...)
		},
		"redisbucket": func(c redis.Scripter, opts ...redislimit.Option) (limiter.Limiter, error) {
			return redislimit.NewBucket(c, limiter.Per(2, time.Hour), 2, opts...)
		},
	}
	for name, newL := range makers {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for _, tc := range []struct {
				policy  limiter.FailurePolicy
				allowed []bool // three calls while Redis is down
				wantErr bool
			}{
				{limiter.FailClosed, []bool{false, false, false}, true},
				{limiter.FailOpen, []bool{true, true, true}, false},
				{limiter.FallbackLocal, []bool{true, true, false}, false},
			} {
				t.Run(tc.policy.String(), func(t *testing.T) {
					t.Parallel()
					c, m := fastFailClient(t)
					var hooked atomic.Int64
					var lastErr error
					var mu sync.Mutex
					l, err := newL(c, redislimit.WithFailurePolicy(tc.policy), redislimit.WithOnFailure(func(_ context.Context, key string, err error) {
						hooked.Add(1)
						mu.Lock()
						lastErr = err
						mu.Unlock()
						assert.Equal(t, "k", key)
					}))
					require.NoError(t, err)
					r, err := l.AllowN(context.Background(), "k", 1)
					require.NoError(t, err)
					require.True(t, r.Allowed)
					require.False(t, r.Degraded)
					m.Close()
					for i, want := range tc.allowed {
						r, err := l.AllowN(context.Background(), "k", 1)
						if tc.wantErr {
							require.ErrorIs(t, err, limiter.ErrUnavailable)
						} else {
							require.NoError(t, err)
							assert.True(t, r.Degraded)
						}
						assert.Equal(t, want, r.Allowed, "call %d", i)
					}
					assert.Equal(t, int64(3), hooked.Load(), "hook sees every failure")
					mu.Lock()
					assert.ErrorIs(t, lastErr, limiter.ErrUnavailable)
					mu.Unlock()
					// refunds report failures too
					rf := l.(limiter.Refunder)
					require.ErrorIs(t, rf.RefundN(context.Background(), "k", 1), limiter.ErrUnavailable)
					assert.Equal(t, int64(4), hooked.Load())
				})
			}
		})
	}
}

// fastFailClient is a miniredis client that gives up dialing at once, so
// tests against a closed server stay fast.
func fastFailClient(t *testing.T) (*redis.Client, *miniredis.Miniredis) {
	t.Helper()
	m := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: m.Addr(), MaxRetries: -1, DialerRetries: 1,
		DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { _ = c.Close() })
	return c, m
}

func TestRedisFailureCustomFallbackAndSetError(t *testing.T) {
	t.Parallel()
	c, m := testenv.Miniredis(t)
	fb, err := limiter.NewKeyed(limiter.Every(time.Hour), 1) // no refill between the calls, however slow
	require.NoError(t, err)
	l, err := redislimit.NewSlidingWindow(c, 5, time.Second, redislimit.WithFailurePolicy(limiter.FallbackLocal), redislimit.WithFallback(fb))
	require.NoError(t, err)
	m.SetError("LOADING Redis is loading the dataset in memory")
	r, err := l.AllowN(context.Background(), "k", 1)
	require.NoError(t, err)
	assert.True(t, r.Allowed && r.Degraded)
	assert.Equal(t, 1, r.Limit, "custom fallback decided")
	r, err = l.AllowN(context.Background(), "k", 1)
	require.NoError(t, err)
	assert.False(t, r.Allowed)
	m.SetError("")
	r, err = l.AllowN(context.Background(), "k", 1)
	require.NoError(t, err)
	assert.True(t, r.Allowed)
	assert.False(t, r.Degraded, "back on Redis")
}

func TestRedisCallerCancelIsNotAStoreFailure(t *testing.T) {
	t.Parallel()
	c, _ := testenv.Miniredis(t)
	var hooked atomic.Int64
	l, err := redislimit.NewSlidingWindow(c, 5, time.Second, redislimit.WithFailurePolicy(limiter.FailOpen),
		redislimit.WithOnFailure(func(context.Context, string, error) { hooked.Add(1) }))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r, err := l.AllowN(ctx, "k", 1)
	require.ErrorIs(t, err, context.Canceled)
	assert.False(t, errors.Is(err, limiter.ErrUnavailable))
	assert.False(t, r.Allowed, "no fail-open for a caller that gave up")
	assert.Zero(t, hooked.Load())
}

// TestBatchingConcurrentAndScriptFlush: many concurrent callers through the
// pipeline batcher, with the script cache flushed in the middle (NOSCRIPT
// inside a pipeline must be recovered), on every Redis kind.
func TestBatchingConcurrentAndScriptFlush(t *testing.T) {
	t.Parallel()
	for kind, c := range testenv.AllRedis(t) {
		t.Run(string(kind), func(t *testing.T) {
			prefix := testenv.Prefix(t)
			for _, batch := range []int{0, 1, 4} {
				l, err := redislimit.NewSlidingWindow(c, 10, time.Hour, redislimit.WithKeyPrefix(prefix),
					redislimit.WithName("b"+string(rune('0'+batch))), redislimit.WithBatching(batch))
				require.NoError(t, err)
				if kind != testenv.KindCluster {
					require.NoError(t, c.ScriptFlush(context.Background()).Err())
				}
				var allowed [5]atomic.Int64
				var wg sync.WaitGroup
				for g := range 20 {
					wg.Go(func() {
						for i := range 5 {
							r, err := l.AllowN(context.Background(), string(rune('a'+(g+i)%5)), 1)
							if !assert.NoError(t, err) {
								return
							}
							if r.Allowed {
								allowed[(g+i)%5].Add(1)
							}
						}
					})
				}
				wg.Wait()
				for k := range allowed {
					assert.Equal(t, int64(10), allowed[k].Load(), "batch %d key %d", batch, k)
				}
			}
		})
	}
}

func TestBatchingAbandonedCallerSpendsNothing(t *testing.T) {
	t.Parallel()
	c, _ := testenv.Miniredis(t)
	l, err := redislimit.NewSlidingWindow(c, 1000, time.Hour, redislimit.WithBatching(1))
	require.NoError(t, err)
	// Cancelled contexts are refused before anything is sent.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for range 50 {
		_, err := l.AllowN(ctx, "k", 1)
		require.ErrorIs(t, err, context.Canceled)
	}
	r, err := l.AllowN(context.Background(), "k", 1)
	require.NoError(t, err)
	assert.Equal(t, 999, r.Remaining)
}

// TestSlidingWindowRefundThenAllowSameInstant: a refund removes the newest
// members; events recorded afterwards at the same Redis TIME must get
// members of their own (not overwrite a surviving one), or the log would
// stop growing and admit without bound within that microsecond.
func TestSlidingWindowRefundThenAllowSameInstant(t *testing.T) {
	t.Parallel()
	l, _, _ := newWindow(t, 12, time.Hour) // the clock stays at t0
	ctx := context.Background()
	r, err := l.AllowN(ctx, "u", 10)
	require.NoError(t, err)
	require.True(t, r.Allowed)
	require.NoError(t, l.RefundN(ctx, "u", 1))
	for i := range 3 {
		r, err = l.AllowN(ctx, "u", 1)
		require.NoError(t, err)
		assert.True(t, r.Allowed, "event %d", i)
		assert.Equal(t, 12-(9+i+1), r.Remaining, "event %d", i)
	}
	r, err = l.AllowN(ctx, "u", 1)
	require.NoError(t, err)
	assert.False(t, r.Allowed, "the 13th event in the window is refused")
}
