package risk

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckillkit/seckill/internal/testenv"
)

// waitFor polls cond (no sleep as synchronisation: the cache's own state
// is read until it changes).
const waitFor = 10 * time.Second

// secondClient returns a new client of the same server(s) as rdb: a second
// process's own connections.
func secondClient(t *testing.T, rdb redis.UniversalClient) redis.UniversalClient {
	t.Helper()
	var c redis.UniversalClient
	switch r := rdb.(type) {
	case *redis.Client:
		c = redis.NewClient(r.Options())
	case *redis.ClusterClient:
		c = redis.NewClusterClient(r.Options())
	default:
		t.Fatalf("unexpected client %T", rdb)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// cacheState reads the revocation bookkeeping of c.
func cacheState(c *AuthCache) (live bool, resets, revs uint64, byHash int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.live, c.resets, c.revs, len(c.byHash)
}

// runCache runs c.Run until the test ends and waits until its subscription
// is confirmed (the cache is live). The cleanup checks that Run returned nil
// on cancel.
func runCache(t *testing.T, c *AuthCache) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		assert.NoError(t, <-errc, "Run returns nil on cancel")
	})
	require.Eventually(t, func() bool { live, _, _, _ := cacheState(c); return live }, waitFor, time.Millisecond,
		"Run subscribed")
}

// checkIndex asserts that the hash → token index mirrors the entries.
func checkIndex(t *testing.T, c *AuthCache) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	require.Len(t, c.byHash, len(c.m))
	for tok, e := range c.m {
		require.Equal(t, hashToken(tok), e.hash)
		require.Equal(t, tok, c.byHash[e.hash])
	}
}

// TestRevocationReachesOtherInstancesAllRedis: two processes (their own
// client and SessionStore) on one Redis. B caches two sessions with a long
// ttl on a clock that never moves; A revokes one: the key is gone and B's
// cache forgets that token (and only that one) at once. A revocation of an
// unknown token and malformed messages change nothing in B's cache.
func TestRevocationReachesOtherInstancesAllRedis(t *testing.T) {
	t.Parallel()
	eachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		t.Parallel()
		storeA, err := NewSessionStore(rdb, SessionConfig{KeyPrefix: prefix})
		require.NoError(t, err)
		cb := &countingClient{UniversalClient: secondClient(t, rdb)}
		storeB, err := NewSessionStore(cb, SessionConfig{KeyPrefix: prefix})
		require.NoError(t, err)
		var logs syncBuffer
		cacheB, err := NewAuthCache(storeB, AuthCacheConfig{TTL: time.Hour, Max: 100, Clock: newFakeClock(), Revocations: storeB, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		require.NoError(t, err)
		runCache(t, cacheB)

		tok, err := storeA.Create(bg, "u1", time.Hour)
		require.NoError(t, err)
		other, err := storeA.Create(bg, "u2", time.Hour)
		require.NoError(t, err)
		for range 3 {
			for _, tk := range []string{tok, other} {
				_, err := cacheB.Authenticate(bg, tk)
				require.NoError(t, err)
			}
		}
		require.Equal(t, 2, cacheB.size())
		require.EqualValues(t, 2, cb.gets.Load(), "B: one GET per session, then cache hits")
		checkIndex(t, cacheB)

		// A revokes tok: the key is gone, B forgets tok without any clock
		// movement.
		key := sessionKey(prefix, hashToken(tok))
		require.EqualValues(t, 1, rdb.Exists(bg, key).Val())
		require.NoError(t, storeA.Revoke(bg, tok))
		assert.EqualValues(t, 0, rdb.Exists(bg, key).Val(), "session key deleted")
		require.Eventually(t, func() bool { return cacheB.size() == 1 }, waitFor, time.Millisecond,
			"B forgot the revoked token")
		_, err = cacheB.Authenticate(bg, tok)
		require.ErrorIs(t, err, ErrInvalidToken, "B refuses the revoked token")
		require.EqualValues(t, 3, cb.gets.Load(), "B asked Redis about the revoked token")
		u, err := cacheB.Authenticate(bg, other)
		require.NoError(t, err)
		assert.Equal(t, "u2", u)
		assert.EqualValues(t, 3, cb.gets.Load(), "the other session is still a cache hit")
		checkIndex(t, cacheB)

		// Revoking an unknown token publishes its hash, which no cache
		// holds; malformed messages are ignored and logged. B has read them
		// all when both revocations are applied and every malformed message
		// is logged (on a Cluster, messages published by different nodes
		// may arrive in any order).
		_, resets, revs, _ := cacheState(cacheB)
		unknown := strings.Repeat("A", 43)
		require.NoError(t, storeA.Revoke(bg, unknown))
		ch := revokedChannel(prefix)
		bad := []string{"", "not a hash", hashToken(tok) + "=", hashToken(tok)[:42], strings.Repeat("A", 42) + "B"}
		for _, m := range bad {
			require.NoError(t, rdb.Publish(bg, ch, m).Err())
		}
		require.NoError(t, storeA.Revoke(bg, tok), "revoking twice")
		require.Eventually(t, func() bool {
			_, _, n, _ := cacheState(cacheB)
			return n == revs+2 && strings.Count(logs.String(), "malformed revocation message") == len(bad)
		}, waitFor, time.Millisecond)
		_, resets2, revs2, _ := cacheState(cacheB)
		assert.Equal(t, revs+2, revs2, "the malformed messages were not applied")
		assert.Equal(t, resets, resets2, "no resubscription: nothing else emptied the cache")
		assert.Equal(t, 1, cacheB.size())
		u, err = cacheB.Authenticate(bg, other)
		require.NoError(t, err)
		assert.Equal(t, "u2", u)
		assert.EqualValues(t, 3, cb.gets.Load(), "the other session is still a cache hit")
		checkIndex(t, cacheB)
	})
}

// TestRevokePublishesTheHash reads the message itself: the SHA-256 of the
// token on "<prefix>risk:session:revoked", never the token, also for an
// unknown token; a string that is not a token publishes nothing.
func TestRevokePublishesTheHash(t *testing.T) {
	t.Parallel()
	rdb, _ := testenv.Miniredis(t)
	pre := testenv.Prefix(t)
	s, err := NewSessionStore(rdb, SessionConfig{KeyPrefix: pre})
	require.NoError(t, err)
	ps := rdb.Subscribe(bg, pre+"risk:session:revoked")
	defer ps.Close()
	_, err = ps.Receive(bg) // the subscription confirmation
	require.NoError(t, err)
	tok, err := s.Create(bg, "u", time.Minute)
	require.NoError(t, err)
	unknown := strings.Repeat("b", 43)
	require.NoError(t, s.Revoke(bg, "not a token"))
	require.NoError(t, s.Revoke(bg, tok))
	require.NoError(t, s.Revoke(bg, unknown))
	for _, want := range []string{hashToken(tok), hashToken(unknown)} {
		ctx, cancel := context.WithTimeout(bg, waitFor)
		m, err := ps.ReceiveMessage(ctx)
		cancel()
		require.NoError(t, err)
		assert.Equal(t, want, m.Payload)
		assert.True(t, validTokenHash(m.Payload))
	}
	assert.False(t, validTokenHash(tok[:42]+"="))
}

// TestAuthCacheMissRacingRevocation: a lookup that read the session before
// it was revoked, and returns after the revocation message was applied,
// does not cache the revoked session; a lookup of another token racing the
// same message does.
func TestAuthCacheMissRacingRevocation(t *testing.T) {
	t.Parallel()
	rdb, _ := testenv.Miniredis(t)
	s, err := NewSessionStore(rdb, SessionConfig{KeyPrefix: testenv.Prefix(t)})
	require.NoError(t, err)
	looked, release := make(chan struct{}), make(chan struct{})
	var hold atomic.Bool
	next := AuthenticatorFunc(func(ctx context.Context, tok string) (string, error) {
		u, err := s.Authenticate(ctx, tok)
		if hold.Load() {
			looked <- struct{}{}
			<-release
		}
		return u, err
	})
	c, err := NewAuthCache(next, AuthCacheConfig{TTL: time.Hour, Max: 10, Clock: newFakeClock(), Revocations: s})
	require.NoError(t, err)
	runCache(t, c)
	tok, err := s.Create(bg, "u1", time.Hour)
	require.NoError(t, err)
	other, err := s.Create(bg, "u2", time.Hour)
	require.NoError(t, err)

	for _, tc := range []struct {
		tok    string
		cached bool
	}{{tok, false}, {other, true}} {
		hold.Store(true)
		done := make(chan error, 1)
		go func() { _, err := c.Authenticate(bg, tc.tok); done <- err }()
		<-looked // the session was read from Redis
		hold.Store(false)
		_, _, revs, _ := cacheState(c)
		require.NoError(t, s.Revoke(bg, tok))
		require.Eventually(t, func() bool { _, _, n, _ := cacheState(c); return n == revs+1 }, waitFor, time.Millisecond)
		close(release)
		require.NoError(t, <-done, "the lookup itself succeeded")
		release = make(chan struct{})
		assert.Equal(t, tc.cached, c.size() == 1, "cached")
		checkIndex(t, c)
	}
}

// TestAuthCacheRunLifecycle: Run needs AuthCacheConfig.Revocations, runs once at a
// time, returns nil when ctx is done and may run again, and fails with
// ErrClosed after Close (which stops a running Run). With Revocations
// the cache stores entries only while Run is subscribed.
func TestAuthCacheRunLifecycle(t *testing.T) {
	t.Parallel()
	rdb, _ := testenv.Miniredis(t)
	s, err := NewSessionStore(rdb, SessionConfig{})
	require.NoError(t, err)
	tok, err := s.Create(bg, "u", time.Hour)
	require.NoError(t, err)

	plain, err := NewAuthCache(s, AuthCacheConfig{TTL: time.Hour, Max: 10})
	require.NoError(t, err)
	require.ErrorIs(t, plain.Run(bg), ErrInvalidConfig, "Run without Revocations")
	require.NoError(t, plain.Close())

	noSub, err := NewSessionStore(struct{ Client }{rdb}, SessionConfig{})
	require.NoError(t, err)
	_, err = NewAuthCache(s, AuthCacheConfig{TTL: time.Hour, Max: 10, Revocations: noSub})
	require.ErrorIs(t, err, ErrInvalidConfig, "a client that cannot Subscribe")

	c, err := NewAuthCache(s, AuthCacheConfig{TTL: time.Hour, Max: 10, Clock: newFakeClock(), Revocations: s})
	require.NoError(t, err)
	_, err = c.Authenticate(bg, tok)
	require.NoError(t, err)
	assert.Equal(t, 0, c.size(), "nothing cached before Run is subscribed")

	for round := range 2 {
		ctx, cancel := context.WithCancel(bg)
		errc := make(chan error, 1)
		go func() { errc <- c.Run(ctx) }()
		require.Eventually(t, func() bool { live, _, _, _ := cacheState(c); return live }, waitFor, time.Millisecond)
		require.ErrorIs(t, c.Run(bg), ErrRunning, "round %d", round)
		_, err = c.Authenticate(bg, tok)
		require.NoError(t, err)
		assert.Equal(t, 1, c.size(), "cached while Run is subscribed")
		cancel()
		require.NoError(t, <-errc, "Run returns nil when ctx is done")
		assert.Equal(t, 0, c.size(), "emptied when Run returns")
		_, err = c.Authenticate(bg, tok)
		require.NoError(t, err)
		assert.Equal(t, 0, c.size(), "nothing cached after Run returned")
	}

	errc := make(chan error, 1)
	go func() { errc <- c.Run(bg) }()
	require.Eventually(t, func() bool { live, _, _, _ := cacheState(c); return live }, waitFor, time.Millisecond)
	require.NoError(t, c.Close())
	select {
	case err := <-errc:
		require.NoError(t, err, "Close stops Run, which returns nil")
	default:
		t.Fatal("Close returned before Run")
	}
	require.ErrorIs(t, c.Run(bg), ErrClosed)
	require.NoError(t, c.Close(), "Close twice")
	u, err := c.Authenticate(bg, tok)
	require.NoError(t, err, "Authenticate works after Close")
	assert.Equal(t, "u", u)
	assert.Equal(t, 0, c.size())
}

// TestAuthCacheResubscribeEmpties: after a reconnect (the server restarted)
// go-redis resubscribes; a revocation published while the connection was
// down is lost, so the confirmation empties the cache, and revocations
// are heard again afterwards.
func TestAuthCacheResubscribeEmpties(t *testing.T) {
	t.Parallel()
	rdb, m := testenv.Miniredis(t)
	s, err := NewSessionStore(rdb, SessionConfig{})
	require.NoError(t, err)
	c, err := NewAuthCache(s, AuthCacheConfig{TTL: time.Hour, Max: 10, Clock: newFakeClock(), Revocations: s})
	require.NoError(t, err)
	runCache(t, c)
	tok, err := s.Create(bg, "u", time.Hour)
	require.NoError(t, err)
	_, err = c.Authenticate(bg, tok)
	require.NoError(t, err)
	require.Equal(t, 1, c.size())
	_, resets, _, _ := cacheState(c)

	m.Close()
	require.NoError(t, m.Restart())
	require.Eventually(t, func() bool { _, n, _, _ := cacheState(c); return n > resets }, waitFor, time.Millisecond,
		"resubscribed")
	assert.Equal(t, 0, c.size(), "emptied on resubscription")
	_, err = c.Authenticate(bg, tok)
	require.NoError(t, err)
	require.Equal(t, 1, c.size())
	require.NoError(t, s.Revoke(bg, tok))
	require.Eventually(t, func() bool { return c.size() == 0 }, waitFor, time.Millisecond, "heard after resubscription")
}

// TestAuthCacheIndexConsistent: the hash → token index follows every way an
// entry leaves: Forget, a failed lookup, the expiry sweep and eviction.
func TestAuthCacheIndexConsistent(t *testing.T) {
	t.Parallel()
	rdb, _ := testenv.Miniredis(t)
	s, err := NewSessionStore(rdb, SessionConfig{})
	require.NoError(t, err)
	var deny atomic.Bool
	next := AuthenticatorFunc(func(_ context.Context, tok string) (string, error) {
		if deny.Load() {
			return "", ErrInvalidToken
		}
		return "u-" + tok, nil
	})
	clk := newFakeClock()
	c, err := NewAuthCache(next, AuthCacheConfig{TTL: time.Minute, Max: 64, Clock: clk, Revocations: s})
	require.NoError(t, err)
	runCache(t, c)
	for i := range 1000 {
		_, err := c.Authenticate(bg, fmt.Sprint("tok", i))
		require.NoError(t, err)
		require.LessOrEqual(t, c.size(), 64)
	}
	checkIndex(t, c)                 // eviction
	for i := 0; c.size() < 64; i++ { // full: the next insert sweeps
		_, err := c.Authenticate(bg, fmt.Sprint("fill", i))
		require.NoError(t, err)
	}
	clk.Advance(2 * time.Minute)
	_, err = c.Authenticate(bg, "after-expiry")
	require.NoError(t, err)
	checkIndex(t, c) // the expiry sweep
	assert.Equal(t, 1, c.size(), "expired entries swept")
	c.Forget("after-expiry")
	checkIndex(t, c)
	_, err = c.Authenticate(bg, "x")
	require.NoError(t, err)
	clk.Advance(2 * time.Minute)
	deny.Store(true)
	_, err = c.Authenticate(bg, "x")
	require.ErrorIs(t, err, ErrInvalidToken)
	checkIndex(t, c) // a failed lookup of an expired entry
	_, _, _, n := cacheState(c)
	assert.Equal(t, 0, n)
}

// TestAuthCacheHitAllocs: a hit allocates nothing (it does not hash the
// token: hashToken allocates), with or without revocations.
func TestAuthCacheHitAllocs(t *testing.T) {
	rdb, _ := testenv.Miniredis(t)
	s, err := NewSessionStore(rdb, SessionConfig{})
	require.NoError(t, err)
	next := AuthenticatorFunc(func(_ context.Context, tok string) (string, error) { return "u", nil })
	plain, err := NewAuthCache(next, AuthCacheConfig{TTL: time.Hour, Max: 10, Clock: newFakeClock()})
	require.NoError(t, err)
	rev, err := NewAuthCache(next, AuthCacheConfig{TTL: time.Hour, Max: 10, Clock: newFakeClock(), Revocations: s})
	require.NoError(t, err)
	runCache(t, rev)
	tok := strings.Repeat("k", 43)
	for _, c := range []*AuthCache{plain, rev} {
		_, err := c.Authenticate(bg, tok)
		require.NoError(t, err)
		require.Equal(t, 1, c.size())
		allocs := testing.AllocsPerRun(1000, func() {
			if _, err := c.Authenticate(bg, tok); err != nil {
				t.Fatal(err)
			}
		})
		assert.Zero(t, allocs)
	}
}

// TestAuthCacheRunClientClosed: when the Redis client is closed under Run
// (no more revocations can be heard), Run returns an error, not nil, and
// the cache stops storing entries.
func TestAuthCacheRunClientClosed(t *testing.T) {
	t.Parallel()
	_, m := testenv.Miniredis(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	s, err := NewSessionStore(rdb, SessionConfig{})
	require.NoError(t, err)
	c, err := NewAuthCache(s, AuthCacheConfig{TTL: time.Hour, Max: 10, Revocations: s})
	require.NoError(t, err)
	errc := make(chan error, 1)
	go func() { errc <- c.Run(bg) }()
	require.Eventually(t, func() bool { live, _, _, _ := cacheState(c); return live }, waitFor, time.Millisecond)
	require.NoError(t, rdb.Close())
	select {
	case err := <-errc:
		require.Error(t, err)
		assert.Contains(t, err.Error(), "subscription")
	case <-time.After(waitFor):
		t.Fatal("Run did not return after the client was closed")
	}
	live, _, _, _ := cacheState(c)
	assert.False(t, live)
	require.NoError(t, c.Close())
}
