package token

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckillkit/seckill/internal/testenv"
)

// takeAndConsume issues a pool for the activity, binds a token to user and
// consumes it.
func takeAndConsume(t *testing.T, p *Pool, activity, user string) Grant {
	t.Helper()
	ctx := context.Background()
	_, err := p.Issue(ctx, activity, 2)
	require.NoError(t, err)
	g, err := p.Take(ctx, activity, user)
	require.NoError(t, err)
	require.Equal(t, Granted, g.Status)
	require.NoError(t, p.Consume(ctx, ConsumeParams{Activity: activity, User: user, Token: g.Token}))
	return g
}

func TestRestoreThenConsumeAgain(t *testing.T) {
	t.Parallel()
	eachRedis(t, func(t *testing.T, p *Pool, clk *fakeClock) {
		ctx := context.Background()
		g := takeAndConsume(t, p, "r1", "alice")
		s, err := p.Stats(ctx, "r1")
		require.NoError(t, err)
		assert.Equal(t, Stats{Issued: 6, Free: 5, Bound: 0, Used: 1}, s)
		assert.ErrorIs(t, p.Consume(ctx, ConsumeParams{Activity: "r1", User: "alice", Token: g.Token}), ErrUsed, "without Restore a retry is refused")

		clk.Add(time.Minute)
		require.NoError(t, p.Restore(ctx, ConsumeParams{Activity: "r1", User: "alice", Token: g.Token}))
		s, err = p.Stats(ctx, "r1")
		require.NoError(t, err)
		assert.Equal(t, Stats{Issued: 6, Free: 5, Bound: 1, Used: 0}, s)

		// The user holds the same token again, with a fresh deadline.
		h, err := p.Take(ctx, "r1", "alice")
		require.NoError(t, err)
		assert.Equal(t, Held, h.Status)
		assert.Equal(t, g.Token, h.Token)
		assert.Equal(t, t0.Add(time.Minute+5*time.Minute).UnixMilli(), h.ExpiresAt.UnixMilli())
		// ... and nobody else does.
		assert.ErrorIs(t, p.Consume(ctx, ConsumeParams{Activity: "r1", User: "bob", Token: g.Token}), ErrWrongUser)

		require.NoError(t, p.Consume(ctx, ConsumeParams{Activity: "r1", User: "alice", Token: g.Token}), "the retry succeeds")
		s, err = p.Stats(ctx, "r1")
		require.NoError(t, err)
		assert.Equal(t, Stats{Issued: 6, Free: 5, Bound: 0, Used: 1}, s)
		assert.ErrorIs(t, p.Consume(ctx, ConsumeParams{Activity: "r1", User: "alice", Token: g.Token}), ErrUsed)
		u, err := p.Take(ctx, "r1", "alice")
		require.NoError(t, err)
		assert.Equal(t, Used, u.Status)
		assert.Equal(t, g.Token, u.Token)
	})
}

func TestRestoreIsIdempotent(t *testing.T) {
	t.Parallel()
	eachRedis(t, func(t *testing.T, p *Pool, clk *fakeClock) {
		ctx := context.Background()
		g := takeAndConsume(t, p, "r2", "alice")
		require.NoError(t, p.Restore(ctx, ConsumeParams{Activity: "r2", User: "alice", Token: g.Token}))
		clk.Add(time.Minute)
		require.NoError(t, p.Restore(ctx, ConsumeParams{Activity: "r2", User: "alice", Token: g.Token}), "second restore is a no-op")
		s, err := p.Stats(ctx, "r2")
		require.NoError(t, err)
		assert.Equal(t, Stats{Issued: 6, Free: 5, Bound: 1, Used: 0}, s, "restoring twice = restoring once")
		h, err := p.Take(ctx, "r2", "alice")
		require.NoError(t, err)
		assert.Equal(t, Held, h.Status)
		assert.Equal(t, t0.Add(5*time.Minute).UnixMilli(), h.ExpiresAt.UnixMilli(),
			"the no-op restore does not extend the deadline")
		require.NoError(t, p.Consume(ctx, ConsumeParams{Activity: "r2", User: "alice", Token: g.Token}))
		assert.ErrorIs(t, p.Consume(ctx, ConsumeParams{Activity: "r2", User: "alice", Token: g.Token}), ErrUsed, "one restore buys one consume")

		// A bound token that was never consumed: nil, nothing changes.
		b, err := p.Take(ctx, "r2", "bob")
		require.NoError(t, err)
		require.Equal(t, Granted, b.Status)
		before, err := p.Stats(ctx, "r2")
		require.NoError(t, err)
		require.NoError(t, p.Restore(ctx, ConsumeParams{Activity: "r2", User: "bob", Token: b.Token}))
		after, err := p.Stats(ctx, "r2")
		require.NoError(t, err)
		assert.Equal(t, before, after)
		assert.Equal(t, Stats{Issued: 6, Free: 4, Bound: 1, Used: 1}, after)
		hb, err := p.Take(ctx, "r2", "bob")
		require.NoError(t, err)
		assert.Equal(t, Held, hb.Status)
		assert.Equal(t, b.ExpiresAt, hb.ExpiresAt)
		require.NoError(t, p.Consume(ctx, ConsumeParams{Activity: "r2", User: "bob", Token: b.Token}))
	})
}

func TestRestoreRefusals(t *testing.T) {
	t.Parallel()
	eachRedis(t, func(t *testing.T, p *Pool, clk *fakeClock) {
		ctx := context.Background()
		a := takeAndConsume(t, p, "r3", "alice") // 6 tokens, alice used one
		b, err := p.Take(ctx, "r3", "bob")
		require.NoError(t, err)

		assert.ErrorIs(t, p.Restore(ctx, ConsumeParams{Activity: "r3", User: "mallory", Token: a.Token}), ErrWrongUser, "used by another user")
		assert.ErrorIs(t, p.Restore(ctx, ConsumeParams{Activity: "r3", User: "alice", Token: b.Token}), ErrWrongUser, "bound to another user")
		assert.ErrorIs(t, p.Restore(ctx, ConsumeParams{Activity: "r3", User: "alice", Token: "AAAAAAAAAAAAAAAAAAAAAA"}), ErrNotFound, "never issued")
		assert.ErrorIs(t, p.Restore(ctx, ConsumeParams{Activity: "other", User: "alice", Token: a.Token}), ErrNotFound, "other activity")
		s, err := p.Stats(ctx, "r3")
		require.NoError(t, err)
		assert.Equal(t, Stats{Issued: 6, Free: 4, Bound: 1, Used: 1}, s, "refused restores change nothing")

		// bob's binding expires unconsumed: nothing to restore, and the
		// token goes back to the pool in the same call.
		clk.Add(5*time.Minute + time.Millisecond)
		assert.ErrorIs(t, p.Restore(ctx, ConsumeParams{Activity: "r3", User: "bob", Token: b.Token}), ErrNotFound)
		s, err = p.Stats(ctx, "r3")
		require.NoError(t, err)
		assert.Equal(t, Stats{Issued: 6, Free: 5, Bound: 0, Used: 1}, s)
		assert.ErrorIs(t, p.Restore(ctx, ConsumeParams{Activity: "r3", User: "bob", Token: b.Token}), ErrNotFound, "free token")
		assert.ErrorIs(t, p.Consume(ctx, ConsumeParams{Activity: "r3", User: "bob", Token: b.Token}), ErrNotFound)

		// The reclaimed token is taken by someone else: bob cannot restore it.
		var carol Grant
		for i := 0; i < 5 && carol.Token != b.Token; i++ {
			carol, err = p.Take(ctx, "r3", "carol"+strings.Repeat("x", i))
			require.NoError(t, err)
			require.Equal(t, Granted, carol.Status)
		}
		require.Equal(t, b.Token, carol.Token, "bob's old token is handed out again")
		assert.ErrorIs(t, p.Restore(ctx, ConsumeParams{Activity: "r3", User: "bob", Token: b.Token}), ErrWrongUser)
	})
}

func TestRestoreDeadlines(t *testing.T) {
	t.Parallel()
	eachRedis(t, func(t *testing.T, p *Pool, clk *fakeClock) {
		ctx := context.Background()
		_, err := p.Issue(ctx, "r4", 3)
		require.NoError(t, err)

		// Consumed 1 ms before its deadline, restored long after it: live
		// again, because Restore always sets a fresh deadline.
		g, err := p.Take(ctx, "r4", "alice")
		require.NoError(t, err)
		clk.Add(10*time.Second - time.Millisecond)
		require.NoError(t, p.Consume(ctx, ConsumeParams{Activity: "r4", User: "alice", Token: g.Token}))
		clk.Add(30 * time.Second)
		restoredAt := clk.Now()
		require.NoError(t, p.Restore(ctx, ConsumeParams{Activity: "r4", User: "alice", Token: g.Token}))
		h, err := p.Take(ctx, "r4", "alice")
		require.NoError(t, err)
		assert.Equal(t, Held, h.Status)
		assert.Equal(t, restoredAt.Add(10*time.Second).UnixMilli(), h.ExpiresAt.UnixMilli())
		n, err := p.Reclaim(ctx, "r4")
		require.NoError(t, err)
		assert.EqualValues(t, 0, n, "the restored binding is live")
		clk.Add(10*time.Second - time.Millisecond)
		require.NoError(t, p.Consume(ctx, ConsumeParams{Activity: "r4", User: "alice", Token: g.Token}), "1 ms before the fresh deadline")

		// Restored, then not retried within the binding TTL: the binding
		// expires like any other.
		require.NoError(t, p.Restore(ctx, ConsumeParams{Activity: "r4", User: "alice", Token: g.Token}))
		clk.Add(10 * time.Second)
		assert.ErrorIs(t, p.Consume(ctx, ConsumeParams{Activity: "r4", User: "alice", Token: g.Token}), ErrExpired, "at the fresh deadline")
		assert.ErrorIs(t, p.Restore(ctx, ConsumeParams{Activity: "r4", User: "alice", Token: g.Token}), ErrNotFound, "went back to the pool")
		s, err := p.Stats(ctx, "r4")
		require.NoError(t, err)
		assert.Equal(t, Stats{Issued: 3, Free: 3, Bound: 0, Used: 0}, s)

		// A restored binding that expired is also reclaimed by Reclaim.
		g2, err := p.Take(ctx, "r4", "bob")
		require.NoError(t, err)
		require.NoError(t, p.Consume(ctx, ConsumeParams{Activity: "r4", User: "bob", Token: g2.Token}))
		require.NoError(t, p.Restore(ctx, ConsumeParams{Activity: "r4", User: "bob", Token: g2.Token}))
		clk.Add(10 * time.Second)
		n, err = p.Reclaim(ctx, "r4")
		require.NoError(t, err)
		assert.EqualValues(t, 1, n)
		assert.ErrorIs(t, p.Restore(ctx, ConsumeParams{Activity: "r4", User: "bob", Token: g2.Token}), ErrNotFound)
	}, WithBindTTL(10*time.Second), WithMultiplier(1))
}

func TestRestoreUsedCounterNeverNegative(t *testing.T) {
	t.Parallel()
	rdb, _ := testenv.Miniredis(t)
	prefix := testenv.Prefix(t)
	p, err := NewPool(rdb, WithKeyPrefix(prefix), WithClock(newFakeClock(t0)))
	require.NoError(t, err)
	ctx := context.Background()
	g := takeAndConsume(t, p, "r5", "alice")
	// The counter was lost (e.g. edited by hand): Restore must not drive it
	// below zero.
	require.NoError(t, rdb.HSet(ctx, newPoolKeys(prefix, "r5").meta, "used", 0).Err())
	require.NoError(t, p.Restore(ctx, ConsumeParams{Activity: "r5", User: "alice", Token: g.Token}))
	s, err := p.Stats(ctx, "r5")
	require.NoError(t, err)
	assert.EqualValues(t, 0, s.Used)
	assert.EqualValues(t, 1, s.Bound)
}

func TestConcurrentRestoreConsume(t *testing.T) {
	t.Parallel()
	eachRedis(t, func(t *testing.T, p *Pool, _ *fakeClock) {
		ctx := context.Background()
		g := takeAndConsume(t, p, "r6", "alice")
		const n = 50

		// Round 1: every goroutine restores, then consumes. The first script
		// to run is a Restore (it finds the token used), the last one a
		// Consume, so at least one consume succeeds and the token ends used.
		var restored, consumed, other atomic.Int64
		var wg sync.WaitGroup
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := p.Restore(ctx, ConsumeParams{Activity: "r6", User: "alice", Token: g.Token}); err == nil {
					restored.Add(1)
				} else {
					other.Add(1)
				}
				switch err := p.Consume(ctx, ConsumeParams{Activity: "r6", User: "alice", Token: g.Token}); {
				case err == nil:
					consumed.Add(1)
				case errors.Is(err, ErrUsed):
				default:
					other.Add(1)
				}
			}()
		}
		wg.Wait()
		assert.Zero(t, other.Load(), "only nil or ErrUsed expected")
		assert.EqualValues(t, n, restored.Load())
		assert.GreaterOrEqual(t, consumed.Load(), int64(1))
		assert.LessOrEqual(t, consumed.Load(), restored.Load(), "never consumed more often than restored")
		s, err := p.Stats(ctx, "r6")
		require.NoError(t, err)
		assert.Equal(t, Stats{Issued: 6, Free: 5, Bound: 0, Used: 1}, s, "ends used, once")
		u, err := p.Take(ctx, "r6", "alice")
		require.NoError(t, err)
		assert.Equal(t, Used, u.Status)

		// Round 2: half restore then consume, half consume then restore.
		// The final state is either used or bound, and the counters agree.
		restored.Store(0)
		consumed.Store(0)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				restore := func() {
					if err := p.Restore(ctx, ConsumeParams{Activity: "r6", User: "alice", Token: g.Token}); err == nil {
						restored.Add(1)
					} else {
						other.Add(1)
					}
				}
				consume := func() {
					switch err := p.Consume(ctx, ConsumeParams{Activity: "r6", User: "alice", Token: g.Token}); {
					case err == nil:
						consumed.Add(1)
					case errors.Is(err, ErrUsed):
					default:
						other.Add(1)
					}
				}
				if i%2 == 0 {
					restore()
					consume()
				} else {
					consume()
					restore()
				}
			}()
		}
		wg.Wait()
		assert.Zero(t, other.Load())
		assert.GreaterOrEqual(t, consumed.Load(), int64(1))
		assert.LessOrEqual(t, consumed.Load(), restored.Load())
		s, err = p.Stats(ctx, "r6")
		require.NoError(t, err)
		h, err := p.Take(ctx, "r6", "alice")
		require.NoError(t, err)
		assert.Equal(t, g.Token, h.Token)
		switch h.Status {
		case Used:
			assert.Equal(t, Stats{Issued: 6, Free: 5, Bound: 0, Used: 1}, s)
		case Held:
			assert.Equal(t, Stats{Issued: 6, Free: 5, Bound: 1, Used: 0}, s)
		default:
			t.Fatalf("token neither used nor bound: %v", h.Status)
		}
	})
}

func TestRestoreRedisTime(t *testing.T) {
	t.Parallel()
	rdb, m := testenv.Miniredis(t)
	m.SetTime(t0)
	p, err := NewPool(rdb, WithKeyPrefix(testenv.Prefix(t)), WithBindTTL(time.Minute))
	require.NoError(t, err)
	ctx := context.Background()
	g := takeAndConsume(t, p, "r7", "alice")
	m.SetTime(t0.Add(time.Hour))
	require.NoError(t, p.Restore(ctx, ConsumeParams{Activity: "r7", User: "alice", Token: g.Token}))
	h, err := p.Take(ctx, "r7", "alice")
	require.NoError(t, err)
	assert.Equal(t, Held, h.Status)
	assert.Equal(t, t0.Add(time.Hour+time.Minute).UnixMilli(), h.ExpiresAt.UnixMilli(), "fresh deadline from Redis TIME")
	m.SetTime(t0.Add(time.Hour + time.Minute))
	assert.ErrorIs(t, p.Consume(ctx, ConsumeParams{Activity: "r7", User: "alice", Token: g.Token}), ErrExpired)
}

func TestRestoreBadInput(t *testing.T) {
	t.Parallel()
	rdb, m := testenv.Miniredis(t)
	p, err := NewPool(rdb, WithKeyPrefix(testenv.Prefix(t)))
	require.NoError(t, err)
	ctx := context.Background()
	m.Close() // malformed input must be refused before any Redis call
	tok := newToken()
	for _, a := range []string{"", "a{b", "a}b", strings.Repeat("a", 129)} {
		assert.ErrorIs(t, p.Restore(ctx, ConsumeParams{Activity: a, User: "u", Token: tok}), ErrInvalidArgument, "activity %q", a)
	}
	for _, u := range []string{"", "u{", "}", strings.Repeat("u", 129)} {
		assert.ErrorIs(t, p.Restore(ctx, ConsumeParams{Activity: "a", User: u, Token: tok}), ErrInvalidArgument, "user %q", u)
	}
	for _, s := range []string{"", "not-a-token", "AAAAAAAAAAAAAAAAAAAAAB", "AAAAAAAAAAAAAAAAAAAAA=", tok + "A", tok[:21]} {
		assert.ErrorIs(t, p.Restore(ctx, ConsumeParams{Activity: "a", User: "u", Token: s}), ErrMalformed, "token %q", s)
	}
	assert.NotPanics(t, func() { _ = p.Restore(ctx, ConsumeParams{Activity: "a", User: "u", Token: "\x00\xff"}) })
}

func TestRestoreRedisFailureIsError(t *testing.T) {
	t.Parallel()
	rdb, m := testenv.Miniredis(t)
	prefix := testenv.Prefix(t)
	p, err := NewPool(rdb, WithKeyPrefix(prefix))
	require.NoError(t, err)
	ctx := context.Background()
	g := takeAndConsume(t, p, "r8", "alice")

	m.SetError("LOADING")
	err = p.Restore(ctx, ConsumeParams{Activity: "r8", User: "alice", Token: g.Token})
	require.Error(t, err)
	assert.ErrorContains(t, err, "token: restore r8: ")
	assert.ErrorContains(t, err, "LOADING")
	for _, s := range []error{ErrNotFound, ErrWrongUser, ErrMalformed, ErrUsed} {
		assert.NotErrorIs(t, err, s)
	}
	m.SetError("")
	s, err := p.Stats(ctx, "r8")
	require.NoError(t, err)
	assert.Equal(t, Stats{Issued: 6, Free: 5, Used: 1}, s, "the failed call changed nothing")
	require.NoError(t, p.Restore(ctx, ConsumeParams{Activity: "r8", User: "alice", Token: g.Token}))

	// A wrongly typed key makes the script fail: an error, never a panic.
	require.NoError(t, m.Set(newPoolKeys(prefix, "r9").state, "x"))
	err = p.Restore(ctx, ConsumeParams{Activity: "r9", User: "alice", Token: g.Token})
	assert.ErrorContains(t, err, "token: restore r9: ")
	assert.NotErrorIs(t, err, ErrNotFound)

	m.Close()
	err = p.Restore(ctx, ConsumeParams{Activity: "r8", User: "alice", Token: g.Token})
	assert.ErrorContains(t, err, "token: restore r8: ")
}
