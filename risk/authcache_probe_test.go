package risk

import (
	"bytes"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckillkit/seckill/internal/testenv"
)

// silencingProxy is a TCP proxy on 127.0.0.1 in front of a Redis server.
// silence makes every connection that has sent SUBSCRIBE so far drop all
// server → client bytes from then on while staying open (a half-open
// connection, an expired NAT entry): nothing errors, nothing arrives.
// Later connections pass normally.
type silencingProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []*proxyConn
	wg     sync.WaitGroup
}

type proxyConn struct {
	client, server     net.Conn
	subscribed, silent atomic.Bool
}

func newSilencingProxy(t *testing.T, target string) *silencingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &silencingProxy{ln: ln, target: target}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *silencingProxy) addr() string { return p.ln.Addr().String() }

func (p *silencingProxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = client.Close()
			continue
		}
		pc := &proxyConn{client: client, server: server}
		p.mu.Lock()
		p.conns = append(p.conns, pc)
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(pc, client, server, true)
		go p.pipe(pc, server, client, false)
	}
}

// pipe copies src to dst; upstream (client → server) it marks a
// connection that sends SUBSCRIBE, downstream it drops what a silenced
// connection receives.
func (p *silencingProxy) pipe(pc *proxyConn, src, dst net.Conn, upstream bool) {
	defer p.wg.Done()
	defer func() { _ = pc.client.Close(); _ = pc.server.Close() }()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if upstream && bytes.Contains(bytes.ToLower(buf[:n]), []byte("subscribe")) {
				pc.subscribed.Store(true)
			}
			if upstream || !pc.silent.Load() {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
		}
		if err != nil {
			return
		}
	}
}

// silence silences the connections that have subscribed and returns how
// many.
func (p *silencingProxy) silence() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, pc := range p.conns {
		if pc.subscribed.Load() {
			pc.silent.Store(true)
			n++
		}
	}
	return n
}

func (p *silencingProxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	for _, pc := range p.conns {
		_ = pc.client.Close()
		_ = pc.server.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// manualTicks replaces the probe ticker of c (before Run) by a channel the
// test sends on: each send is one probe tick, taken when Run is ready for
// it. It records the interval Run asked for.
func manualTicks(t *testing.T, c *AuthCache) (tick func(), interval func() time.Duration) {
	ticks := make(chan time.Time)
	var asked atomic.Int64
	c.ticker = func(d time.Duration) (<-chan time.Time, func()) {
		asked.Store(int64(d))
		return ticks, func() {}
	}
	tick = func() {
		t.Helper()
		select {
		case ticks <- time.Time{}:
		case <-time.After(waitFor): // a guard against a hang, not a timing assert
			t.Fatal("Run did not take the probe tick")
		}
	}
	return tick, func() time.Duration { return time.Duration(asked.Load()) }
}

// probesBack reads how many probes came back over c's subscription.
func probesBack(c *AuthCache) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.probes
}

// TestAuthCacheSilentSubscription (N3): the revocation subscription stops
// forwarding without any error (the proxy keeps the connection open and
// drops every server → client byte). A revocation published then is lost;
// the cache serves the revoked session until the probe that did not come
// back is noticed, at the second probe tick: from then on the cache is
// emptied and refuses the revoked session (Redis answers), Run has
// resubscribed on a new connection and revocations are heard again. While
// the subscription was healthy, probes came back and nothing was emptied.
// Before the probe existed the cache kept serving the revoked session for
// its ttl (an hour here).
func TestAuthCacheSilentSubscription(t *testing.T) {
	t.Parallel()
	rdb, m := testenv.Miniredis(t)
	pre := testenv.Prefix(t)
	store, err := NewSessionStore(rdb, SessionConfig{KeyPrefix: pre})
	require.NoError(t, err)
	px := newSilencingProxy(t, m.Addr())
	prdb := redis.NewClient(&redis.Options{Addr: px.addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = prdb.Close() })
	subStore, err := NewSessionStore(prdb, SessionConfig{KeyPrefix: pre}) // the subscription's path
	require.NoError(t, err)
	var logs syncBuffer
	c, err := NewAuthCache(store, AuthCacheConfig{TTL: time.Hour, Max: 100, Clock: newFakeClock(), Revocations: subStore, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	require.NoError(t, err)
	tick, _ := manualTicks(t, c)
	runCache(t, c)

	tok, err := store.Create(bg, "u1", time.Hour)
	require.NoError(t, err)
	_, err = c.Authenticate(bg, tok)
	require.NoError(t, err)
	require.Equal(t, 1, c.size())

	// Healthy: every probe comes back before the next tick.
	_, resets, _, _ := cacheState(c)
	for i := range 4 {
		tick()
		require.Eventually(t, func() bool { return probesBack(c) == uint64(i+1) }, waitFor, time.Millisecond,
			"probe %d back", i+1)
	}
	_, resets2, _, _ := cacheState(c)
	assert.Equal(t, resets, resets2, "a healthy subscription is never emptied")
	assert.Equal(t, 1, c.size())

	// The subscription goes silent; the revocation is lost.
	require.Equal(t, 1, px.silence(), "one subscribed connection")
	require.NoError(t, store.Revoke(bg, tok))
	_, err = store.Authenticate(bg, tok)
	require.ErrorIs(t, err, ErrInvalidToken, "revoked in Redis")
	u, err := c.Authenticate(bg, tok)
	require.NoError(t, err, "the lost revocation: still served within the bound")
	require.Equal(t, "u1", u)

	// Probe 5 cannot come back; the tick after it is the liveness bound
	// (2 × the interval after the revocation, at most).
	tick() // probe 5 sent
	_, resets3, _, _ := cacheState(c)
	assert.Equal(t, resets, resets3, "not emptied before the bound")
	tick() // probe 5 missed
	require.Eventually(t, func() bool { _, n, _, _ := cacheState(c); return n > resets }, waitFor, time.Millisecond,
		"the silent subscription was noticed")
	_, err = c.Authenticate(bg, tok)
	require.ErrorIs(t, err, ErrInvalidToken, "after the liveness bound the revoked session is refused")
	// The counter moves before the warning is written (reset, then log).
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "revocation subscription silent") }, waitFor, time.Millisecond,
		"the silent subscription was logged")

	// Run resubscribed on a new connection: live again, revocations heard.
	require.Eventually(t, func() bool { live, _, _, _ := cacheState(c); return live }, waitFor, time.Millisecond,
		"resubscribed")
	other, err := store.Create(bg, "u2", time.Hour)
	require.NoError(t, err)
	_, err = c.Authenticate(bg, other)
	require.NoError(t, err)
	require.Equal(t, 1, c.size())
	require.NoError(t, store.Revoke(bg, other))
	require.Eventually(t, func() bool { return c.size() == 0 }, waitFor, time.Millisecond, "heard on the new subscription")
	n := probesBack(c)
	tick()
	require.Eventually(t, func() bool { return probesBack(c) == n+1 }, waitFor, time.Millisecond,
		"probes come back on the new subscription")
}

// TestAuthCacheProbeUnpublished: when the probe cannot even be published
// (the store's client fails), the next tick empties the cache as well.
func TestAuthCacheProbeUnpublished(t *testing.T) {
	t.Parallel()
	rdb, m := testenv.Miniredis(t)
	s, err := NewSessionStore(rdb, SessionConfig{KeyPrefix: testenv.Prefix(t)})
	require.NoError(t, err)
	var logs syncBuffer
	c, err := NewAuthCache(s, AuthCacheConfig{TTL: time.Hour, Max: 10, Clock: newFakeClock(), Revocations: s, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	require.NoError(t, err)
	tick, _ := manualTicks(t, c)
	runCache(t, c)
	tok, err := s.Create(bg, "u", time.Hour)
	require.NoError(t, err)
	_, err = c.Authenticate(bg, tok)
	require.NoError(t, err)
	_, resets, _, _ := cacheState(c)

	m.SetError("LOADING")
	tick()
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "probe not published") },
		waitFor, time.Millisecond)
	m.SetError("")
	tick()
	require.Eventually(t, func() bool { _, n, _, _ := cacheState(c); return n > resets }, waitFor, time.Millisecond)
	assert.Equal(t, 0, c.size(), "emptied")
}

// TestRevocationProbeInterval: the interval reaches Run's ticker (default
// 5s), and an interval below 1ms is bad configuration.
func TestRevocationProbeInterval(t *testing.T) {
	t.Parallel()
	rdb, _ := testenv.Miniredis(t)
	s, err := NewSessionStore(rdb, SessionConfig{KeyPrefix: testenv.Prefix(t)})
	require.NoError(t, err)
	for _, tc := range []struct {
		interval time.Duration
		want     time.Duration
	}{{0, 5 * time.Second}, {250 * time.Millisecond, 250 * time.Millisecond}} {
		c, err := NewAuthCache(s, AuthCacheConfig{TTL: time.Hour, Max: 10, Revocations: s, ProbeInterval: tc.interval})
		require.NoError(t, err)
		_, interval := manualTicks(t, c)
		runCache(t, c)
		assert.Equal(t, tc.want, interval())
	}
	for _, d := range []time.Duration{-time.Second, time.Microsecond} {
		_, err := NewAuthCache(s, AuthCacheConfig{TTL: time.Hour, Max: 10, Revocations: s, ProbeInterval: d})
		assert.True(t, errors.Is(err, ErrInvalidConfig), "%v", d)
	}
}

// TestAuthCacheProbeRoundTripAllRedis: on every Redis kind (a Cluster
// relays the probe, published on any node, to the subscriber's node) the
// probes come back and a healthy subscription is never emptied.
func TestAuthCacheProbeRoundTripAllRedis(t *testing.T) {
	t.Parallel()
	eachRedis(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		t.Parallel()
		s, err := NewSessionStore(rdb, SessionConfig{KeyPrefix: prefix})
		require.NoError(t, err)
		c, err := NewAuthCache(s, AuthCacheConfig{TTL: time.Hour, Max: 10, Clock: newFakeClock(), Revocations: s})
		require.NoError(t, err)
		tick, _ := manualTicks(t, c)
		runCache(t, c)
		_, resets, _, _ := cacheState(c)
		for i := range 5 {
			tick()
			require.Eventually(t, func() bool { return probesBack(c) == uint64(i+1) }, waitFor, time.Millisecond,
				"probe %d back", i+1)
		}
		tick()
		live, resets2, _, _ := cacheState(c)
		assert.True(t, live)
		assert.Equal(t, resets, resets2, "never emptied")
	})
}
