package risk

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSessionStoreAllRedis(t *testing.T) {
	t.Parallel()
	eachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		s, err := NewSessionStore(rdb, SessionConfig{KeyPrefix: prefix})
		require.NoError(t, err)
		tok, err := s.Create(bg, "u42", time.Minute)
		require.NoError(t, err)
		assert.Len(t, tok, 43)
		_, err = ParseBearer("Bearer " + tok)
		require.NoError(t, err, "tokens are valid bearer tokens")

		u, err := s.Authenticate(bg, tok)
		require.NoError(t, err)
		assert.Equal(t, "u42", u)

		// The raw token is not stored in the key.
		keys, err := rdb.Keys(bg, prefix+"*").Result()
		if _, isCluster := rdb.(*redis.ClusterClient); !isCluster {
			require.NoError(t, err)
			require.Len(t, keys, 1)
			assert.NotContains(t, keys[0], tok)
			ttl := rdb.PTTL(bg, keys[0]).Val()
			assert.Greater(t, ttl, 50*time.Second)
		}

		tok2, err := s.Create(bg, "u42", 0)
		require.NoError(t, err)
		assert.NotEqual(t, tok, tok2)

		for _, bad := range []string{"forged", tok + "x", strings.ToUpper(tok), "", "a b"} {
			_, err = s.Authenticate(bg, bad)
			assert.ErrorIs(t, err, ErrInvalidToken, "%q", bad)
		}

		require.NoError(t, s.Revoke(bg, tok))
		_, err = s.Authenticate(bg, tok)
		assert.ErrorIs(t, err, ErrInvalidToken, "revoked")
		require.NoError(t, s.Revoke(bg, tok), "revoking twice is a no-op")
		require.NoError(t, s.Revoke(bg, "not a token"))
		u, err = s.Authenticate(bg, tok2)
		require.NoError(t, err, "other session of the user untouched")
		assert.Equal(t, "u42", u)

		_, err = s.Create(bg, "", 0)
		assert.ErrorIs(t, err, ErrInvalidArgument)
		_, err = s.Create(bg, "u", -time.Second)
		assert.ErrorIs(t, err, ErrInvalidArgument)
	})
}

func TestSessionExpiryAndSliding(t *testing.T) {
	t.Parallel()
	rdb, m := testenv.Miniredis(t)
	fixed, err := NewSessionStore(rdb, SessionConfig{KeyPrefix: "f:", TTL: 10 * time.Minute})
	require.NoError(t, err)
	sliding, err := NewSessionStore(rdb, SessionConfig{KeyPrefix: "s:", TTL: 10 * time.Minute, Sliding: true})
	require.NoError(t, err)
	ft, err := fixed.Create(bg, "a", 0)
	require.NoError(t, err)
	st, err := sliding.Create(bg, "b", 0)
	require.NoError(t, err)

	for i := 0; i < 3; i++ {
		m.FastForward(6 * time.Minute)
		_, err = sliding.Authenticate(bg, st)
		require.NoError(t, err, "sliding session kept alive by use (step %d)", i)
	}
	_, err = fixed.Authenticate(bg, ft)
	assert.ErrorIs(t, err, ErrInvalidToken, "fixed session expired after 18m > 10m")

	m.FastForward(11 * time.Minute)
	_, err = sliding.Authenticate(bg, st)
	assert.ErrorIs(t, err, ErrInvalidToken, "idle sliding session expires")
}

func TestSessionStoreDown(t *testing.T) {
	t.Parallel()
	rdb, m := testenv.Miniredis(t)
	s, err := NewSessionStore(rdb, SessionConfig{})
	require.NoError(t, err)
	tok, err := s.Create(bg, "u", 0)
	require.NoError(t, err)
	auth, err := NewAuth(s)
	require.NoError(t, err)

	got := doAuth(t, auth, func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tok) })
	assert.Equal(t, 204, got.status)
	assert.Equal(t, "u", got.user)

	m.SetError("LOADING Redis is loading the dataset in memory")
	_, err = s.Authenticate(bg, tok)
	require.Error(t, err)
	assert.NotErrorIs(t, err, ErrInvalidToken, "an outage is not an invalid token")
	got = doAuth(t, auth, func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tok) })
	assert.Equal(t, 503, got.status)
	assert.Equal(t, `{"error":"unavailable"}`, got.body)
	_, err = s.Create(bg, "u", 0)
	assert.Error(t, err)

	m.SetError("")
	m.Close()
	got = doAuth(t, auth, func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tok) })
	assert.Equal(t, 503, got.status, "server gone")

	_, err = NewSessionStore(nil, SessionConfig{})
	assert.ErrorIs(t, err, ErrInvalidConfig)
	for _, ttl := range []time.Duration{-time.Second, time.Microsecond} {
		_, err = NewSessionStore(rdb, SessionConfig{TTL: ttl})
		assert.ErrorIs(t, err, ErrInvalidConfig, "%v", ttl)
	}
}

// countingClient counts the commands that reach Redis.
type countingClient struct {
	redis.UniversalClient
	gets, getexs atomic.Int64
}

func (c *countingClient) Get(ctx context.Context, key string) *redis.StringCmd {
	c.gets.Add(1)
	return c.UniversalClient.Get(ctx, key)
}

func (c *countingClient) GetEx(ctx context.Context, key string, d time.Duration) *redis.StringCmd {
	c.getexs.Add(1)
	return c.UniversalClient.GetEx(ctx, key, d)
}

func TestAuthHotPathOneCommand(t *testing.T) {
	t.Parallel()
	rdb, _ := testenv.Miniredis(t)
	cc := &countingClient{UniversalClient: rdb}
	for _, sliding := range []bool{false, true} {
		s, err := NewSessionStore(cc, SessionConfig{Sliding: sliding})
		require.NoError(t, err)
		tok, err := s.Create(bg, "u", 0)
		require.NoError(t, err)
		auth, err := NewAuth(s)
		require.NoError(t, err)
		before := cc.gets.Load() + cc.getexs.Load()
		for i := 0; i < 10; i++ {
			got := doAuth(t, auth, func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tok) })
			require.Equal(t, 204, got.status)
		}
		assert.EqualValues(t, 10, cc.gets.Load()+cc.getexs.Load()-before, "one command per request")
		if sliding {
			assert.EqualValues(t, 10, cc.getexs.Load())
		}
		// With an AuthCache in front: one command for ten requests.
		cache, err := NewAuthCache(s, AuthCacheConfig{TTL: time.Second, Max: 10})
		require.NoError(t, err)
		auth, err = NewAuth(cache)
		require.NoError(t, err)
		before = cc.gets.Load() + cc.getexs.Load()
		for i := 0; i < 10; i++ {
			got := doAuth(t, auth, func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tok) })
			require.Equal(t, 204, got.status)
		}
		assert.EqualValues(t, 1, cc.gets.Load()+cc.getexs.Load()-before)
	}
}
