package risk

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// AuthCache wraps an [Authenticator] with a small in-process cache of
// successful lookups, so a hot user costs no Redis round trip for ttl.
//
// Staleness: a revoked or expired session stays accepted by this process
// for up to ttl after its revocation (call [AuthCache.Forget] on the
// instance that revokes; other instances wait for expiry). Keep ttl short
// (a few seconds) or do not use the cache where instant logout matters.
// Failures and invalid tokens are never cached. Cache hits do not reach
// the wrapped store, so they do not extend a [WithSlidingTTL] session.
//
// The cache holds at most max entries; when full, expired entries are
// swept and, if still full, arbitrary entries are evicted down to 3/4. AuthCache is
// safe for concurrent use.
type AuthCache struct {
	next  Authenticator
	ttl   time.Duration
	max   int
	clock Clock

	mu sync.Mutex
	m  map[string]cacheEntry
}

type cacheEntry struct {
	user    string
	expires time.Time
}

// NewAuthCache returns a caching Authenticator over next. Options (each an
// [AuthCacheOption]): [WithClock]; a nil option is ignored. A nil next, a
// ttl <= 0, a max < 1 or a nil clock fails with [ErrInvalidArgument].
func NewAuthCache(next Authenticator, ttl time.Duration, max int, opts ...AuthCacheOption) (*AuthCache, error) {
	if next == nil || ttl <= 0 || max < 1 {
		return nil, fmt.Errorf("risk: auth cache needs an authenticator, ttl > 0 and max >= 1: %w", ErrInvalidArgument)
	}
	o, err := buildOptions(opts, AuthCacheOption.applyAuthCache)
	if err != nil {
		return nil, err
	}
	return &AuthCache{next: next, ttl: ttl, max: max, clock: o.clock, m: make(map[string]cacheEntry)}, nil
}

// Authenticate answers from the cache, or asks the wrapped Authenticator
// and caches a success.
func (c *AuthCache) Authenticate(ctx context.Context, token string) (string, error) {
	now := c.clock.Now()
	c.mu.Lock()
	e, ok := c.m[token]
	c.mu.Unlock()
	if ok && now.Before(e.expires) {
		return e.user, nil
	}
	user, err := c.next.Authenticate(ctx, token)
	if err != nil {
		if ok {
			c.Forget(token)
		}
		return "", err
	}
	c.mu.Lock()
	if _, present := c.m[token]; !present && len(c.m) >= c.max {
		for k, v := range c.m {
			if !now.Before(v.expires) {
				delete(c.m, k)
			}
		}
		// Still full of live entries: evict arbitrary ones down to 3/4 so
		// the next max/4 inserts need no sweep (amortised O(1)).
		for k := range c.m {
			if len(c.m) < c.max-c.max/4 || len(c.m) < c.max && c.max < 4 {
				break
			}
			delete(c.m, k)
		}
	}
	c.m[token] = cacheEntry{user: user, expires: now.Add(c.ttl)}
	c.mu.Unlock()
	return user, nil
}

// Forget drops token from the cache (call it after revoking it).
func (c *AuthCache) Forget(token string) {
	c.mu.Lock()
	delete(c.m, token)
	c.mu.Unlock()
}

// Len returns the number of cached entries.
func (c *AuthCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}
