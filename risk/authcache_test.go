package risk

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAuthCache(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	var calls atomic.Int64
	valid := map[string]string{"t1": "u1", "t2": "u2"}
	var down atomic.Bool
	next := AuthenticatorFunc(func(ctx context.Context, tok string) (string, error) {
		calls.Add(1)
		if down.Load() {
			return "", errors.New("redis down")
		}
		if u, ok := valid[tok]; ok {
			return u, nil
		}
		return "", fmt.Errorf("x: %w", ErrInvalidToken)
	})
	c, err := NewAuthCache(next, AuthCacheConfig{TTL: 5 * time.Second, Max: 100, Clock: clk})
	require.NoError(t, err)

	for i := 0; i < 10; i++ {
		u, err := c.Authenticate(bg, "t1")
		require.NoError(t, err)
		assert.Equal(t, "u1", u)
	}
	assert.EqualValues(t, 1, calls.Load(), "hits served from cache")

	for i := 0; i < 3; i++ {
		_, err = c.Authenticate(bg, "bad")
		assert.ErrorIs(t, err, ErrInvalidToken)
	}
	assert.EqualValues(t, 4, calls.Load(), "invalid tokens never cached")

	// Staleness: revoked upstream, still accepted until the entry expires.
	delete(valid, "t1")
	clk.Add(4 * time.Second)
	u, err := c.Authenticate(bg, "t1")
	require.NoError(t, err)
	assert.Equal(t, "u1", u, "stale within ttl (documented)")
	clk.Add(time.Second)
	_, err = c.Authenticate(bg, "t1")
	assert.ErrorIs(t, err, ErrInvalidToken, "refused once the entry expired")
	assert.Equal(t, 0, c.size(), "expired entry dropped on refusal")

	// Forget takes effect at once.
	_, err = c.Authenticate(bg, "t2")
	require.NoError(t, err)
	delete(valid, "t2")
	c.Forget("t2")
	_, err = c.Authenticate(bg, "t2")
	assert.ErrorIs(t, err, ErrInvalidToken)

	// Failures are not cached and pass through as non-auth errors.
	valid["t3"] = "u3"
	down.Store(true)
	_, err = c.Authenticate(bg, "t3")
	require.Error(t, err)
	assert.NotErrorIs(t, err, ErrInvalidToken)
	down.Store(false)
	u, err = c.Authenticate(bg, "t3")
	require.NoError(t, err)
	assert.Equal(t, "u3", u)

	for _, bad := range []struct {
		next Authenticator
		ttl  time.Duration
		max  int
	}{{nil, time.Second, 1}, {next, 0, 1}, {next, time.Second, 0}} {
		_, err := NewAuthCache(bad.next, AuthCacheConfig{TTL: bad.ttl, Max: bad.max})
		assert.ErrorIs(t, err, ErrInvalidConfig)
	}
}

func TestAuthCacheBounded(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	next := AuthenticatorFunc(func(ctx context.Context, tok string) (string, error) { return "u-" + tok, nil })
	c, err := NewAuthCache(next, AuthCacheConfig{TTL: time.Minute, Max: 64, Clock: clk})
	require.NoError(t, err)
	for i := 0; i < 10_000; i++ {
		u, err := c.Authenticate(bg, fmt.Sprint(i))
		require.NoError(t, err)
		require.Equal(t, "u-"+fmt.Sprint(i), u)
		require.LessOrEqual(t, c.size(), 64)
	}
	c1, err := NewAuthCache(next, AuthCacheConfig{TTL: time.Minute, Max: 1, Clock: clk})
	require.NoError(t, err)
	for i := 0; i < 10; i++ {
		_, err := c1.Authenticate(bg, fmt.Sprint(i))
		require.NoError(t, err)
		require.Equal(t, 1, c1.size())
	}
}
