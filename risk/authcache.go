package risk

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckillkit/seckill/internal/lifecycle"
)

// subscriber is the one plain-client method [AuthCache.Run] uses to hear
// session revocations ([AuthCacheConfig.Revocations]). *redis.Client,
// *redis.ClusterClient, *redis.Ring and redis.UniversalClient have it.
type subscriber interface {
	Subscribe(ctx context.Context, channels ...string) *redis.PubSub
}

// AuthCache wraps an [Authenticator] with an in-process cache of successful
// lookups, so a hot user costs no Redis round trip for TTL.
//
// Revocation: with [AuthCacheConfig.Revocations] and [AuthCache.Run] running, a
// [SessionStore.Revoke] on any instance reaches every running cache at
// once (a pub/sub message published in the same atomic step as the
// delete), so TTL can be long (minutes to hours) and logout is still
// near-instant everywhere. Only while Run is subscribed does such a cache
// store entries; a resubscription after a reconnect empties it (messages
// may have been lost meanwhile). A session that expires by its own Redis
// TTL is not announced: a cache accepts it until its entry expires, so
// TTL still bounds that staleness.
//
// Liveness: a subscription can stop delivering without any error (a
// half-open TCP connection, an expired NAT entry: go-redis' own health
// check writes PING but never waits for the PONG), so Run proves the
// channel by a round trip. Every probe interval ([AuthCacheConfig.ProbeInterval],
// default 5s) it publishes a probe through the store's client on a
// channel private to this cache, received on the same subscription
// connection as the revocations; a probe not received by the next probe
// tick empties the cache, stops it storing entries and resubscribes on a
// new connection. The bound: a revocation reaches every cache within 2 ×
// the probe interval (10s by default), or that cache has been emptied by
// then and asks the wrapped Authenticator until it is subscribed again.
// (On a Cluster the probe proves the subscriber's connection and node;
// messages published on other nodes reach it over the cluster bus.)
//
// Without [AuthCacheConfig.Revocations] a revoked or expired session stays accepted by
// this process for up to TTL (call [AuthCache.Forget] on the instance that
// revokes; other instances wait for expiry): keep TTL short then.
//
// Failures and invalid tokens are never cached. Cache hits do not reach
// the wrapped store, so they do not extend a [SessionConfig.Sliding] session. A
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
	sub     subscriber // nil without Revocations
	channel string
	// pub publishes the liveness probes (the store's client), on
	// probeChannel (private to this cache) every probeEvery.
	pub          redis.Scripter
	probeChannel string
	probeEvery   time.Duration
	// ticker starts the probe ticks: a time.Ticker; tests inject ticks.
	ticker func(d time.Duration) (<-chan time.Time, func())

	mu sync.Mutex
	m  map[string]cacheEntry
	// byHash maps hashToken(token) → token for every entry (Revocations
	// only), so a revocation message finds its entry without hashing on
	// the hit path.
	byHash map[string]string
	// live: Run's subscription is confirmed; entries are stored only then
	// (Revocations only).
	live bool
	// resets counts the times every entry was dropped (subscription
	// confirmed, Run ended); revs the revocation messages applied, the
	// latest hashes in recent[revs%len(recent)]. A miss compares them with
	// their values before its lookup, so a session revoked while the
	// lookup was in flight is not cached.
	resets, revs uint64
	recent       [64]string
	// probes counts the liveness probes received back.
	probes uint64

	w lifecycle.Worker // Run's bookkeeping
}

type cacheEntry struct {
	user    string
	expires time.Time
	hash    string // hashToken(token) with Revocations, else ""
}

// cacheMark is what a miss remembers of the revocation state before its
// lookup.
type cacheMark struct{ resets, revs uint64 }

// AuthCacheConfig holds the settings of [NewAuthCache]. TTL and Max are
// required; every other zero field keeps its default.
type AuthCacheConfig struct {
	// TTL is how long a successful lookup is served from the cache; > 0.
	TTL time.Duration
	// Max is the most entries the cache holds; >= 1.
	Max int
	// Revocations makes the cache hear the revocations of a
	// [SessionStore]: [SessionStore.Revoke] publishes the token's hash on
	// the store's channel ("<prefix>risk:session:revoked") in the same
	// atomic step that deletes the session, and [AuthCache.Run],
	// subscribed through the store's client, forgets that token at once,
	// on every instance. A long TTL is then safe for revocation; a session
	// that expires by its own Redis TTL is still accepted until its entry
	// expires. With Revocations the cache stores entries only while Run is
	// subscribed and its subscription answers the liveness probe
	// (ProbeInterval): before Run, after it returns, across a
	// resubscription (when messages may have been lost) and when a probe
	// is not answered in time it is emptied and every call asks the
	// wrapped Authenticator. A revocation thus reaches a running cache
	// within 2 × ProbeInterval (10s by default), or the cache serves
	// nothing by then. The store is usually the cache's Authenticator too;
	// its client must have Subscribe (*redis.Client, *redis.ClusterClient,
	// *redis.Ring, any redis.UniversalClient). Default: none.
	Revocations *SessionStore
	// ProbeInterval sets how often [AuthCache.Run] proves that its
	// revocation subscription still delivers: every interval it publishes
	// a probe through the store's client and expects it back over the
	// subscription before the next one. A probe not back in time empties
	// the cache (it stores nothing meanwhile) and Run resubscribes on a new
	// connection. Each probe is one PUBLISH to a channel only this cache
	// listens on. Default 5s; at least 1ms; no effect without Revocations.
	ProbeInterval time.Duration
	// Clock gives entry expiry. Default: the system clock.
	Clock Clock
	// Logger logs a malformed revocation message and a lost subscription.
	// Default: discard.
	Logger *slog.Logger
}

// NewAuthCache returns a caching Authenticator over next with the settings
// of cfg. A nil next, a TTL <= 0, a Max < 1, a ProbeInterval below 1ms
// (other than 0) or a Revocations store whose client cannot Subscribe
// fails with [ErrInvalidConfig].
func NewAuthCache(next Authenticator, cfg AuthCacheConfig) (*AuthCache, error) {
	if next == nil || cfg.TTL <= 0 || cfg.Max < 1 {
		return nil, fmt.Errorf("risk: auth cache needs an authenticator, TTL > 0 and Max >= 1: %w", ErrInvalidConfig)
	}
	o := defaultOptions()
	o.setCommon("", cfg.Clock, cfg.Logger)
	o.revProbe = orDefault(cfg.ProbeInterval, o.revProbe)
	if o.revProbe < time.Millisecond {
		o.fail("revocation probe interval must be >= 1ms")
	}
	if store := cfg.Revocations; store != nil {
		sub, ok := store.rdb.(subscriber)
		if !ok {
			o.fail("Revocations: the session store's client cannot Subscribe")
		}
		o.revSub, o.revPub, o.revChannel = sub, store.rdb, revokedChannel(store.o.prefix)
	}
	if o.err != nil {
		return nil, o.err
	}
	ttl, max := cfg.TTL, cfg.Max
	c := &AuthCache{next: next, ttl: ttl, max: max, clock: o.clock, logger: o.logger,
		sub: o.revSub, channel: o.revChannel, pub: o.revPub, probeEvery: o.revProbe,
		ticker: realTicker, m: make(map[string]cacheEntry)}
	if c.sub != nil {
		c.byHash = make(map[string]string)
		c.probeChannel = c.channel + ":probe:" + rand.Text()
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

// Forget drops token from the cache. With [AuthCacheConfig.Revocations] and Run
// running, [SessionStore.Revoke] makes every cache forget the token; call
// Forget yourself otherwise, or when a session ends in another way.
func (c *AuthCache) Forget(token string) {
	c.mu.Lock()
	if e, ok := c.m[token]; ok {
		c.drop(token, e)
	}
	c.mu.Unlock()
}

// size returns the number of cached entries.
func (c *AuthCache) size() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

// Run hears the session revocations of the [AuthCacheConfig.Revocations] store until
// ctx is done or [AuthCache.Close] is called, and then returns nil. It
// subscribes to the store's revocation channel through the store's client
// (go-redis resubscribes after a reconnect) and forgets each revoked token
// as its message arrives. Each subscription confirmation (the first, and
// every one after a reconnect) empties the cache, since messages may have
// been lost before it, and entries are stored only from then on; when Run
// returns the cache is emptied and stores nothing until the next Run is
// subscribed. A message that is not a token hash is logged and ignored.
//
// Every probe interval ([AuthCacheConfig.ProbeInterval], default 5s) Run publishes a
// probe (a sequence number on "<channel>:probe:<random>", a channel of
// this cache only) through the store's client. When the confirmation or
// the last probe has not come back over the subscription by the next
// tick, the subscription is presumed silently dead: Run logs it, empties
// the cache (which stores nothing meanwhile) and subscribes again on a
// new connection. So a revocation reaches this cache within 2 × the probe
// interval, or the cache is empty by then.
//
// Run fails with [ErrInvalidConfig] when the cache was built without
// [AuthCacheConfig.Revocations], [ErrRunning] while another Run is active, [ErrClosed]
// after Close, and with an error when the subscription ends under it (the
// Redis client was closed).
func (c *AuthCache) Run(ctx context.Context) error {
	if c.sub == nil {
		return fmt.Errorf("risk: auth cache Run needs AuthCacheConfig.Revocations: %w", ErrInvalidConfig)
	}
	ctx, stop, err := c.w.Begin(ctx, "risk: auth cache")
	if err != nil {
		return err
	}
	defer stop()
	defer c.reset(false) // before stop: once Run is over the cache stores nothing
	var probes sync.WaitGroup
	defer probes.Wait()
	pctx, cancel := context.WithCancel(ctx)
	defer cancel() // before probes.Wait: stops the probes in flight
	for {
		err := c.listen(ctx, pctx, &probes)
		if !errors.Is(err, errSilent) {
			return err
		}
	}
}

// errSilent: the subscription did not answer a probe in time (listen's
// caller subscribes again).
var errSilent = errors.New("risk: auth cache: revocation subscription silent")

// listen runs one subscription until ctx is done (nil), the subscription
// is closed under it (an error) or it misses a probe ([errSilent]; the
// cache was emptied). Probes are published with pctx.
func (c *AuthCache) listen(ctx, pctx context.Context, probes *sync.WaitGroup) error {
	ps := c.sub.Subscribe(ctx, c.channel, c.probeChannel)
	defer ps.Close()
	msgs := ps.ChannelWithSubscriptions()
	ticks, stopTicks := c.ticker(c.probeEvery)
	defer stopTicks()
	// answered: the confirmation, then each probe, came back. want is the
	// payload of the probe in flight.
	var seq uint64
	answered, want := false, ""
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
					answered = true // a confirmation is a round trip too
				}
			case *redis.Message:
				switch m.Channel {
				case c.channel:
					c.revoked(m.Payload)
				case c.probeChannel:
					if !answered && want != "" && m.Payload == want {
						answered = true
						c.mu.Lock()
						c.probes++
						c.mu.Unlock()
					}
				}
			}
		case <-ticks:
			if !answered {
				c.reset(false)
				c.logger.Warn("risk: auth cache: revocation subscription silent: no answer within the probe interval; cache emptied, resubscribing",
					"channel", c.channel, "interval", c.probeEvery)
				return errSilent
			}
			seq++
			answered, want = false, strconv.FormatUint(seq, 10)
			probes.Add(1)
			go c.probe(pctx, want, probes)
		}
	}
}

// probe publishes one probe message, giving up after one probe interval.
func (c *AuthCache) probe(runCtx context.Context, payload string, wg *sync.WaitGroup) {
	defer wg.Done()
	ctx, cancel := context.WithTimeout(runCtx, c.probeEvery)
	defer cancel()
	if err := probeScript.Run(ctx, c.pub, nil, c.probeChannel, payload).Err(); err != nil && runCtx.Err() == nil {
		c.logger.Warn("risk: auth cache: revocation probe not published", "channel", c.probeChannel, "err", err)
	}
}

func realTicker(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTicker(d)
	return t.C, t.Stop
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
// [AuthCacheConfig.Revocations] it then stores nothing). It never closes the Redis
// client. Safe to call twice.
func (c *AuthCache) Close() error {
	c.w.Shutdown()
	return nil
}
