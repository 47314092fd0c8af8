package risk

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckillkit/seckill/internal/lifecycle"
)

// Subscriber is the one plain-client method [AuthCache.Run] uses to hear
// session revocations ([WithRevocations]). *redis.Client,
// *redis.ClusterClient, *redis.Ring and redis.UniversalClient have it.
type Subscriber interface {
	Subscribe(ctx context.Context, channels ...string) *redis.PubSub
}

// AuthCache wraps an [Authenticator] with an in-process cache of successful
// lookups, so a hot user costs no Redis round trip for ttl.
//
// Revocation: with [WithRevocations] and [AuthCache.Run] running, a
// [SessionStore.Revoke] on any instance reaches every running cache at
// once (a pub/sub message published in the same atomic step as the
// delete), so ttl can be long (minutes to hours) and logout is still
// near-instant everywhere. Only while Run is subscribed does such a cache
// store entries; a resubscription after a reconnect empties it (messages
// may have been lost meanwhile). A session that expires by its own Redis
// TTL is not announced: a cache accepts it until its entry expires, so
// ttl still bounds that staleness.
//
// Without [WithRevocations] a revoked or expired session stays accepted by
// this process for up to ttl (call [AuthCache.Forget] on the instance that
// revokes; other instances wait for expiry): keep ttl short then.
//
// Failures and invalid tokens are never cached. Cache hits do not reach
// the wrapped store, so they do not extend a [WithSlidingTTL] session. A
// hit is one clock read and one map lookup under a mutex: it never hashes
// the token (the hash → token index used by revocations is filled on a
// miss).
//
// The cache holds at most max entries; when full, expired entries are
// swept and, if still full, arbitrary entries are evicted down to 3/4.
// AuthCache is safe for concurrent use.
type AuthCache struct {
	next    Authenticator
	ttl     time.Duration
	max     int
	clock   Clock
	logger  *slog.Logger
	sub     Subscriber // nil without WithRevocations
	channel string

	mu sync.Mutex
	m  map[string]cacheEntry
	// byHash maps hashToken(token) → token for every entry (WithRevocations
	// only), so a revocation message finds its entry without hashing on
	// the hit path.
	byHash map[string]string
	// live: Run's subscription is confirmed; entries are stored only then
	// (WithRevocations only).
	live bool
	// resets counts the times every entry was dropped (subscription
	// confirmed, Run ended); revs the revocation messages applied, the
	// latest hashes in recent[revs%len(recent)]. A miss compares them with
	// their values before its lookup, so a session revoked while the
	// lookup was in flight is not cached.
	resets, revs uint64
	recent       [64]string

	w lifecycle.Worker // Run's bookkeeping
}

type cacheEntry struct {
	user    string
	expires time.Time
	hash    string // hashToken(token) with WithRevocations, else ""
}

// cacheMark is what a miss remembers of the revocation state before its
// lookup.
type cacheMark struct{ resets, revs uint64 }

// NewAuthCache returns a caching Authenticator over next. Options (each an
// [AuthCacheOption]): [WithClock], [WithLogger], [WithRevocations]; a nil
// option is ignored. A nil next, a ttl <= 0, a max < 1, a nil clock or an
// invalid [WithRevocations] fails with [ErrInvalidArgument].
func NewAuthCache(next Authenticator, ttl time.Duration, max int, opts ...AuthCacheOption) (*AuthCache, error) {
	if next == nil || ttl <= 0 || max < 1 {
		return nil, fmt.Errorf("risk: auth cache needs an authenticator, ttl > 0 and max >= 1: %w", ErrInvalidArgument)
	}
	o, err := buildOptions(opts, AuthCacheOption.applyAuthCache)
	if err != nil {
		return nil, err
	}
	c := &AuthCache{next: next, ttl: ttl, max: max, clock: o.clock, logger: o.logger,
		sub: o.revSub, channel: o.revChannel, m: make(map[string]cacheEntry)}
	if c.sub != nil {
		c.byHash = make(map[string]string)
	}
	return c, nil
}

// Authenticate answers from the cache, or asks the wrapped Authenticator
// and caches a success.
func (c *AuthCache) Authenticate(ctx context.Context, token string) (string, error) {
	now := c.clock.Now()
	c.mu.Lock()
	e, ok := c.m[token]
	mark := cacheMark{c.resets, c.revs}
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
	var hash string
	if c.sub != nil {
		hash = hashToken(token) // a miss: a Redis round trip was paid already
	}
	c.mu.Lock()
	if c.sub == nil || c.mayCache(mark, hash) {
		c.insert(token, cacheEntry{user: user, expires: now.Add(c.ttl), hash: hash}, now)
	}
	c.mu.Unlock()
	return user, nil
}

// mayCache reports whether a session found by a lookup that began at mark
// may be stored: Run is subscribed, the cache was not emptied since, and
// no revocation of hash arrived since (a revocation applied before the
// entry exists would otherwise be lost). Called with mu held.
func (c *AuthCache) mayCache(mark cacheMark, hash string) bool {
	if !c.live || c.resets != mark.resets || c.revs-mark.revs > uint64(len(c.recent)) {
		return false
	}
	for i := mark.revs + 1; i <= c.revs; i++ {
		if c.recent[i%uint64(len(c.recent))] == hash {
			return false
		}
	}
	return true
}

// insert stores e under token, making room first. Called with mu held.
func (c *AuthCache) insert(token string, e cacheEntry, now time.Time) {
	if _, present := c.m[token]; !present && len(c.m) >= c.max {
		for k, v := range c.m {
			if !now.Before(v.expires) {
				c.drop(k, v)
			}
		}
		// Still full of live entries: evict arbitrary ones down to 3/4 so
		// the next max/4 inserts need no sweep (amortised O(1)).
		for k, v := range c.m {
			if len(c.m) < c.max-c.max/4 || len(c.m) < c.max && c.max < 4 {
				break
			}
			c.drop(k, v)
		}
	}
	c.m[token] = e
	if e.hash != "" {
		c.byHash[e.hash] = token
	}
}

// drop removes the entry e of token and its index. Called with mu held.
func (c *AuthCache) drop(token string, e cacheEntry) {
	delete(c.m, token)
	if e.hash != "" {
		delete(c.byHash, e.hash)
	}
}

// Forget drops token from the cache. With [WithRevocations] and Run
// running, [SessionStore.Revoke] makes every cache forget the token; call
// Forget yourself otherwise, or when a session ends in another way.
func (c *AuthCache) Forget(token string) {
	c.mu.Lock()
	if e, ok := c.m[token]; ok {
		c.drop(token, e)
	}
	c.mu.Unlock()
}

// Len returns the number of cached entries.
func (c *AuthCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

// Run hears the session revocations of the [WithRevocations] store until
// ctx is done or [AuthCache.Close] is called, and then returns nil. It
// subscribes to the store's revocation channel through the store's client
// (go-redis resubscribes after a reconnect) and forgets each revoked token
// as its message arrives. Each subscription confirmation (the first, and
// every one after a reconnect) empties the cache, since messages may have
// been lost before it, and entries are stored only from then on; when Run
// returns the cache is emptied and stores nothing until the next Run is
// subscribed. A message that is not a token hash is logged and ignored.
//
// Run fails with [ErrInvalidArgument] when the cache was built without
// [WithRevocations], [ErrRunning] while another Run is active, [ErrClosed]
// after Close, and with an error when the subscription ends under it (the
// Redis client was closed).
func (c *AuthCache) Run(ctx context.Context) error {
	if c.sub == nil {
		return fmt.Errorf("risk: auth cache Run needs WithRevocations: %w", ErrInvalidArgument)
	}
	ctx, stop, err := c.w.Begin(ctx, "risk: auth cache")
	if err != nil {
		return err
	}
	defer stop()
	defer c.reset(false) // before stop: once Run is over the cache stores nothing
	ps := c.sub.Subscribe(ctx, c.channel)
	defer ps.Close()
	msgs := ps.ChannelWithSubscriptions()
	for {
		select {
		case <-ctx.Done():
			return nil
		case m, ok := <-msgs:
			if !ok {
				if ctx.Err() != nil {
					return nil
				}
				c.logger.Warn("risk: auth cache: revocation subscription closed", "channel", c.channel)
				return fmt.Errorf("risk: auth cache: revocation subscription to %s closed", c.channel)
			}
			switch m := m.(type) {
			case *redis.Subscription:
				if m.Kind == "subscribe" && m.Channel == c.channel {
					c.reset(true)
				}
			case *redis.Message:
				if m.Channel == c.channel {
					c.revoked(m.Payload)
				}
			}
		}
	}
}

// reset empties the cache; live says whether entries may be stored from
// now on (a subscription was confirmed) or not (Run ends).
func (c *AuthCache) reset(live bool) {
	c.mu.Lock()
	clear(c.m)
	clear(c.byHash)
	c.resets++
	c.live = live
	c.mu.Unlock()
}

// revoked applies one revocation message: the hash of a revoked token.
func (c *AuthCache) revoked(hash string) {
	if !validTokenHash(hash) {
		c.logger.Warn("risk: auth cache: ignoring a malformed revocation message", "channel", c.channel, "bytes", len(hash))
		return
	}
	c.mu.Lock()
	c.revs++
	c.recent[c.revs%uint64(len(c.recent))] = hash
	if tok, ok := c.byHash[hash]; ok {
		c.drop(tok, c.m[tok])
	}
	c.mu.Unlock()
}

// Close stops [AuthCache.Run], waits for it to return and makes later Run
// calls fail with [ErrClosed]. Authenticate keeps working (with
// [WithRevocations] it then stores nothing). It never closes the Redis
// client. Safe to call twice.
func (c *AuthCache) Close() error {
	c.w.Shutdown()
	return nil
}
