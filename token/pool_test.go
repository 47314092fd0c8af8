package token

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckillkit/seckill/internal/testenv"
)

var (
	_ redis.Scripter = (*redis.Client)(nil)
	_ redis.Scripter = (*redis.ClusterClient)(nil)
	_ redis.Scripter = (*redis.Ring)(nil)
)

// eachRedis runs f against every Redis kind available (miniredis always,
// real standalone and Cluster when their env vars are set), with a fake
// clock injected into the pool so expiry is controlled on real servers too.
// The fake clock may stand at any date: with WithClock the scripts never read
// Redis TIME and the pool sets no Redis TTL (binding deadlines are
// sorted-set scores compared with the injected "now"), so fake time never
// meets the server's clock.
func eachRedis(t *testing.T, f func(t *testing.T, p *Pool, clk *fakeClock), opts ...PoolOption) {
	t.Helper()
	for kind, rdb := range testenv.AllRedis(t) {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			clk := newFakeClock(t0)
			all := append([]PoolOption{WithKeyPrefix(testenv.Prefix(t)), WithClock(clk)}, opts...)
			p, err := NewPool(rdb, all...)
			require.NoError(t, err)
			f(t, p, clk)
		})
	}
}

func TestNewPoolValidates(t *testing.T) {
	t.Parallel()
	rdb, _ := testenv.Miniredis(t)
	_, err := NewPool(nil)
	assert.ErrorIs(t, err, ErrInvalidConfig, "nil client")
	assert.NotPanics(t, func() { _, err = NewPool(rdb, nil) })
	assert.NoError(t, err, "a nil option is ignored")
	for i, o := range []PoolOption{WithMultiplier(0), WithBindTTL(0), WithReclaimBatch(-1), WithIssueBatch(0), WithClock(nil)} {
		_, err := NewPool(rdb, o)
		assert.ErrorIs(t, err, ErrInvalidConfig, "option %d", i)
	}
}

func TestPoolKeysShareOneHashTag(t *testing.T) {
	t.Parallel()
	tag := regexp.MustCompile(`\{[^}]*\}`)
	keys := newPoolKeys("seckill:", "42").all()
	for _, k := range keys {
		assert.Equal(t, "{a:42}", tag.FindString(k), k)
	}
	assert.Len(t, keys, 5)
	assert.Equal(t, "{a:42}", tag.FindString(nonceKey("seckill:", "42", "abc")))
}

func TestIssueIsIdempotent(t *testing.T) {
	t.Parallel()
	eachRedis(t, func(t *testing.T, p *Pool, _ *fakeClock) {
		ctx := context.Background()
		n, err := p.Issue(ctx, "1", 10)
		require.NoError(t, err)
		assert.EqualValues(t, 30, n)
		n, err = p.Issue(ctx, "1", 10)
		require.NoError(t, err)
		assert.EqualValues(t, 30, n, "issuing twice must not double the pool")
		s, err := p.Stats(ctx, "1")
		require.NoError(t, err)
		assert.Equal(t, Stats{Issued: 30, Free: 30}, s)

		n, err = p.Issue(ctx, "1", 12) // top up by the difference
		require.NoError(t, err)
		assert.EqualValues(t, 36, n)
		n, err = p.Issue(ctx, "1", 5) // never shrinks
		require.NoError(t, err)
		assert.EqualValues(t, 36, n)
		st, err := p.Stats(ctx, "1")
		require.NoError(t, err)
		assert.EqualValues(t, 36, st.Free+st.Expired)

		// zero stock: issued (Empty), not NotIssued
		n, err = p.Issue(ctx, "zero", 0)
		require.NoError(t, err)
		assert.EqualValues(t, 0, n)
		g, err := p.Take(ctx, "zero", "u")
		require.NoError(t, err)
		assert.Equal(t, Empty, g.Status)
	}, WithIssueBatch(7))
}

func TestIssueConcurrentNeverOvershoots(t *testing.T) {
	t.Parallel()
	eachRedis(t, func(t *testing.T, p *Pool, _ *fakeClock) {
		ctx := context.Background()
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := p.Issue(ctx, "c", 50)
				assert.NoError(t, err)
			}()
		}
		wg.Wait()
		s, err := p.Stats(ctx, "c")
		require.NoError(t, err)
		assert.EqualValues(t, 150, s.Issued)
		assert.EqualValues(t, 150, s.Free)
	}, WithIssueBatch(13))
}

func TestTakeBindsAndHolds(t *testing.T) {
	t.Parallel()
	eachRedis(t, func(t *testing.T, p *Pool, clk *fakeClock) {
		ctx := context.Background()
		g, err := p.Take(ctx, "2", "alice")
		require.NoError(t, err)
		assert.Equal(t, NotIssued, g.Status)

		_, err = p.Issue(ctx, "2", 2) // 6 tokens
		require.NoError(t, err)
		g, err = p.Take(ctx, "2", "alice")
		require.NoError(t, err)
		require.Equal(t, Granted, g.Status)
		assert.True(t, ValidPoolToken(g.Token), g.Token)
		assert.Equal(t, t0.Add(5*time.Minute).UnixMilli(), g.ExpiresAt.UnixMilli())
		assert.EqualValues(t, 5, g.Remaining)

		clk.Add(time.Minute)
		again, err := p.Take(ctx, "2", "alice")
		require.NoError(t, err)
		assert.Equal(t, Held, again.Status)
		assert.Equal(t, g.Token, again.Token, "a live holder gets the same token back")
		assert.Equal(t, g.ExpiresAt, again.ExpiresAt)

		seen := map[string]bool{g.Token: true}
		for i := range 5 {
			gi, err := p.Take(ctx, "2", fmt.Sprint("u", i))
			require.NoError(t, err)
			require.Equal(t, Granted, gi.Status)
			assert.False(t, seen[gi.Token], "token handed out twice")
			seen[gi.Token] = true
		}
		g, err = p.Take(ctx, "2", "late")
		require.NoError(t, err)
		assert.Equal(t, Empty, g.Status)
		assert.Empty(t, g.Token)
		s, err := p.Stats(ctx, "2")
		require.NoError(t, err)
		assert.Equal(t, Stats{Issued: 6, Free: 0, Bound: 6}, s)
	})
}

func TestConsumeRefusals(t *testing.T) {
	t.Parallel()
	eachRedis(t, func(t *testing.T, p *Pool, clk *fakeClock) {
		ctx := context.Background()
		_, err := p.Issue(ctx, "3", 1) // 3 tokens
		require.NoError(t, err)
		a, err := p.Take(ctx, "3", "alice")
		require.NoError(t, err)
		b, err := p.Take(ctx, "3", "bob")
		require.NoError(t, err)

		refusals := map[error]int{}
		count := func(err error) {
			for _, s := range []error{ErrWrongUser, ErrUsed, ErrNotFound, ErrExpired, ErrMalformed, ErrInvalidArgument} {
				if errors.Is(err, s) {
					refusals[s]++
				}
			}
		}
		count(p.Consume(ctx, ConsumeParams{Activity: "3", User: "alice", Token: b.Token}))                  // other user's token
		count(p.Consume(ctx, ConsumeParams{Activity: "3", User: "mallory", Token: a.Token}))                // other user's token
		count(p.Consume(ctx, ConsumeParams{Activity: "3", User: "alice", Token: "AAAAAAAAAAAAAAAAAAAAAA"})) // never issued
		count(p.Consume(ctx, ConsumeParams{Activity: "3", User: "alice", Token: "not-a-token"}))            // malformed
		count(p.Consume(ctx, ConsumeParams{Activity: "3{x}", User: "alice", Token: a.Token}))               // bad activity: the caller's mistake
		require.NoError(t, p.Consume(ctx, ConsumeParams{Activity: "3", User: "alice", Token: a.Token}))
		count(p.Consume(ctx, ConsumeParams{Activity: "3", User: "alice", Token: a.Token})) // consumed
		assert.Equal(t, map[error]int{ErrWrongUser: 2, ErrNotFound: 1, ErrMalformed: 1, ErrInvalidArgument: 1, ErrUsed: 1}, refusals)

		// after consuming, the user does not get another token
		g, err := p.Take(ctx, "3", "alice")
		require.NoError(t, err)
		assert.Equal(t, Used, g.Status)
		assert.Equal(t, a.Token, g.Token)

		// bob's binding expires unused: refused, and the token goes back
		clk.Add(5*time.Minute + time.Millisecond)
		assert.ErrorIs(t, p.Consume(ctx, ConsumeParams{Activity: "3", User: "bob", Token: b.Token}), ErrExpired)
		assert.ErrorIs(t, p.Consume(ctx, ConsumeParams{Activity: "3", User: "bob", Token: b.Token}), ErrNotFound)
		s, err := p.Stats(ctx, "3")
		require.NoError(t, err)
		assert.Equal(t, Stats{Issued: 3, Free: 2, Bound: 0, Used: 1}, s)
	})
}

func TestBindingExpiresAtDeadline(t *testing.T) {
	t.Parallel()
	eachRedis(t, func(t *testing.T, p *Pool, clk *fakeClock) {
		ctx := context.Background()
		_, err := p.Issue(ctx, "4", 2)
		require.NoError(t, err)
		g, err := p.Take(ctx, "4", "alice")
		require.NoError(t, err)
		clk.Add(10*time.Second - time.Millisecond)
		require.NoError(t, p.Consume(ctx, ConsumeParams{Activity: "4", User: "alice", Token: g.Token}), "1 ms before the deadline")

		g, err = p.Take(ctx, "4", "bob")
		require.NoError(t, err)
		require.Equal(t, Granted, g.Status)
		clk.Add(10 * time.Second)
		assert.ErrorIs(t, p.Consume(ctx, ConsumeParams{Activity: "4", User: "bob", Token: g.Token}), ErrExpired, "at the deadline")
	}, WithBindTTL(10*time.Second), WithMultiplier(1))
}

func TestTakeReclaimsExpired(t *testing.T) {
	t.Parallel()
	eachRedis(t, func(t *testing.T, p *Pool, clk *fakeClock) {
		ctx := context.Background()
		_, err := p.Issue(ctx, "5", 3)
		require.NoError(t, err)
		var held []Grant
		for _, u := range []string{"a", "b", "c"} {
			g, err := p.Take(ctx, "5", u)
			require.NoError(t, err)
			require.Equal(t, Granted, g.Status)
			held = append(held, g)
		}
		g, err := p.Take(ctx, "5", "d")
		require.NoError(t, err)
		assert.Equal(t, Empty, g.Status)
		st, err := p.Stats(ctx, "5")
		require.NoError(t, err)
		assert.EqualValues(t, 0, st.Free+st.Expired)

		clk.Add(time.Minute)
		st, err = p.Stats(ctx, "5")
		require.NoError(t, err)
		assert.EqualValues(t, 3, st.Free+st.Expired, "expired bindings can be taken again")

		// "a" comes back after expiry: its token went back, it gets one again
		ga, err := p.Take(ctx, "5", "a")
		require.NoError(t, err)
		assert.Equal(t, Granted, ga.Status)
		gd, err := p.Take(ctx, "5", "d")
		require.NoError(t, err)
		assert.Equal(t, Granted, gd.Status)
		// old holders' tokens are now someone else's or free again
		for _, old := range held[1:] {
			err := p.Consume(ctx, ConsumeParams{Activity: "5", User: "zzz", Token: old.Token})
			assert.True(t, errors.Is(err, ErrNotFound) || errors.Is(err, ErrWrongUser), err)
		}
		// ... and their former holders can no longer spend them.
		for i, u := range []string{"b", "c"} {
			err := p.Consume(ctx, ConsumeParams{Activity: "5", User: u, Token: held[i+1].Token})
			assert.True(t, errors.Is(err, ErrNotFound) || errors.Is(err, ErrWrongUser), "%s: %v", u, err)
		}
		s, err := p.Stats(ctx, "5")
		require.NoError(t, err)
		assert.Equal(t, Stats{Issued: 3, Free: 1, Bound: 2}, s)
	}, WithMultiplier(1), WithBindTTL(time.Minute), WithReclaimBatch(2))
}

func TestReclaim(t *testing.T) {
	t.Parallel()
	eachRedis(t, func(t *testing.T, p *Pool, clk *fakeClock) {
		ctx := context.Background()
		_, err := p.Issue(ctx, "6", 10)
		require.NoError(t, err)
		for i := range 7 {
			_, err := p.Take(ctx, "6", fmt.Sprint(i))
			require.NoError(t, err)
		}
		n, err := p.Reclaim(ctx, "6")
		require.NoError(t, err)
		assert.EqualValues(t, 0, n)
		clk.Add(time.Second)
		n, err = p.Reclaim(ctx, "6")
		require.NoError(t, err)
		assert.EqualValues(t, 7, n)
		s, err := p.Stats(ctx, "6")
		require.NoError(t, err)
		assert.Equal(t, Stats{Issued: 10, Free: 10}, s)
		require.NoError(t, p.Drop(ctx, "6"))
		s, err = p.Stats(ctx, "6")
		require.NoError(t, err)
		assert.Equal(t, Stats{Issued: -1}, s)
	}, WithMultiplier(1), WithBindTTL(time.Second), WithReclaimBatch(0))
}

func TestConcurrentDoubleConsume(t *testing.T) {
	t.Parallel()
	eachRedis(t, func(t *testing.T, p *Pool, _ *fakeClock) {
		ctx := context.Background()
		_, err := p.Issue(ctx, "7", 1)
		require.NoError(t, err)
		g, err := p.Take(ctx, "7", "alice")
		require.NoError(t, err)
		var ok, used, other atomic.Int64
		var wg sync.WaitGroup
		for range 64 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				switch err := p.Consume(ctx, ConsumeParams{Activity: "7", User: "alice", Token: g.Token}); {
				case err == nil:
					ok.Add(1)
				case errors.Is(err, ErrUsed):
					used.Add(1)
				default:
					other.Add(1)
				}
			}()
		}
		wg.Wait()
		assert.EqualValues(t, 1, ok.Load(), "exactly one consume succeeds")
		assert.EqualValues(t, 63, used.Load())
		assert.EqualValues(t, 0, other.Load())
	}, WithMultiplier(1))
}

func TestConcurrentTakeNoDoubleBinding(t *testing.T) {
	t.Parallel()
	eachRedis(t, func(t *testing.T, p *Pool, _ *fakeClock) {
		ctx := context.Background()
		_, err := p.Issue(ctx, "8", 10) // 20 tokens
		require.NoError(t, err)
		var mu sync.Mutex
		tokens := map[string]string{}
		var empty atomic.Int64
		var wg sync.WaitGroup
		for i := range 100 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				user := fmt.Sprint("u", i%60) // 40 users call twice
				g, err := p.Take(ctx, "8", user)
				if !assert.NoError(t, err) {
					return
				}
				switch g.Status {
				case Granted, Held:
					mu.Lock()
					if prev, ok := tokens[g.Token]; ok {
						assert.Equal(t, prev, user, "token bound to two users")
					}
					tokens[g.Token] = user
					mu.Unlock()
				case Empty:
					empty.Add(1)
				default:
					t.Errorf("unexpected status %v", g.Status)
				}
			}()
		}
		wg.Wait()
		assert.Len(t, tokens, 20, "every token bound, none twice")
		users := map[string]bool{}
		for _, u := range tokens {
			users[u] = true
		}
		assert.Len(t, users, 20, "one token per user")
		s, err := p.Stats(ctx, "8")
		require.NoError(t, err)
		assert.Equal(t, Stats{Issued: 20, Bound: 20}, s)
	}, WithMultiplier(2))
}

func TestPoolRedisTime(t *testing.T) {
	t.Parallel()
	rdb, m := testenv.Miniredis(t)
	m.SetTime(t0)
	p, err := NewPool(rdb, WithKeyPrefix(testenv.Prefix(t)), WithBindTTL(time.Minute))
	require.NoError(t, err)
	ctx := context.Background()
	_, err = p.Issue(ctx, "9", 1)
	require.NoError(t, err)
	g, err := p.Take(ctx, "9", "alice")
	require.NoError(t, err)
	assert.Equal(t, t0.Add(time.Minute).UnixMilli(), g.ExpiresAt.UnixMilli(), "deadline from Redis TIME")
	m.SetTime(t0.Add(time.Minute))
	assert.ErrorIs(t, p.Consume(ctx, ConsumeParams{Activity: "9", User: "alice", Token: g.Token}), ErrExpired)
}

func TestPoolRedisFailureIsError(t *testing.T) {
	t.Parallel()
	rdb, m := testenv.Miniredis(t)
	p, err := NewPool(rdb, WithKeyPrefix(testenv.Prefix(t)))
	require.NoError(t, err)
	ctx := context.Background()
	_, err = p.Issue(ctx, "10", 1)
	require.NoError(t, err)
	m.SetError("LOADING")
	_, err = p.Take(ctx, "10", "u")
	assert.ErrorContains(t, err, "LOADING")
	err = p.Consume(ctx, ConsumeParams{Activity: "10", User: "u", Token: "AAAAAAAAAAAAAAAAAAAAAA"})
	assert.Error(t, err)
	for _, s := range []error{ErrNotFound, ErrUsed, ErrWrongUser, ErrExpired} {
		assert.NotErrorIs(t, err, s)
	}
	_, err = p.Issue(ctx, "10", 2)
	assert.Error(t, err)
	_, err = p.Stats(ctx, "10")
	assert.Error(t, err)
	_, err = p.Reclaim(ctx, "10")
	assert.Error(t, err)
	m.SetError("")
	m.Close()
	_, err = p.Take(ctx, "10", "u")
	assert.Error(t, err)
}

func TestPoolBadReply(t *testing.T) {
	t.Parallel()
	rdb, m := testenv.Miniredis(t)
	prefix := testenv.Prefix(t)
	p, err := NewPool(rdb, WithKeyPrefix(prefix))
	require.NoError(t, err)
	ctx := context.Background()
	// A wrongly typed key makes the script fail: an error, never a panic.
	require.NoError(t, m.Set(newPoolKeys(prefix, "11").meta, "x"))
	_, err = p.Take(ctx, "11", "u")
	assert.Error(t, err)
}

func TestPoolBadInput(t *testing.T) {
	t.Parallel()
	rdb, _ := testenv.Miniredis(t)
	p, err := NewPool(rdb)
	require.NoError(t, err)
	ctx := context.Background()
	for _, a := range []string{"", "a{b", "a}b", string(make([]byte, 129))} {
		_, err := p.Take(ctx, a, "u")
		assert.ErrorIs(t, err, ErrInvalidArgument)
		_, err = p.Issue(ctx, a, 1)
		assert.ErrorIs(t, err, ErrInvalidArgument)
	}
	_, err = p.Take(ctx, "a", "")
	assert.ErrorIs(t, err, ErrInvalidArgument)
	assert.NotErrorIs(t, err, ErrRefused, "bad input is not a refusal")
	_, err = p.Issue(ctx, "a", -1)
	assert.ErrorIs(t, err, ErrInvalidArgument)
}

func TestStatusString(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "granted", Granted.String())
	assert.Equal(t, "not issued", NotIssued.String())
	assert.Equal(t, "status(9)", Status(9).String())
}

func TestValidPoolToken(t *testing.T) {
	t.Parallel()
	for range 100 {
		assert.True(t, ValidPoolToken(newToken()))
	}
	for _, s := range []string{"", "AAAAAAAAAAAAAAAAAAAAAB", "AAAAAAAAAAAAAAAAAAAAA=", "AAAAAAAAAAAAAAAAAAAAAAA", "AAAAAAAAAAAAAAAAAAAA+A"} {
		assert.False(t, ValidPoolToken(s), s)
	}
}
