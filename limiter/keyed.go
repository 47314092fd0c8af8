package limiter

import (
	"context"
	"fmt"
	"hash/maphash"
	"math"
	"sync"
	"sync/atomic"
)

// Keyed is an in-process token bucket per key (user, device, IP) on one
// node: each key gets burst tokens refilled at rate per second, exactly as
// a [TokenBucket]. It implements [Limiter] and [Refunder] and is safe for
// concurrent use: keys live in a sharded map (read-locked lookup, then one
// atomic compare-and-swap per decision).
//
// # Memory
//
// Memory is bounded and needs no background goroutine:
//   - Idle keys are evicted: a key whose bucket is full again carries no
//     information (dropping it and recreating it full later is exact), and
//     such keys are swept from a shard whenever it has doubled since its
//     last sweep.
//   - The number of keys is capped ([WithMaxKeys], default 1<<20, spread
//     over [WithShards] shards). When a shard is at its cap and a sweep
//     frees nothing, the entry closest to full among a random sample of 8 is
//     dropped; that key restarts with a full bucket. So an attacker rotating
//     more keys than the cap can regain burst for the keys pushed out: size
//     the cap above the number of keys active within burst/rate seconds.
//
// # Exceptions
//
// [WithException] gives a key its own rate and burst (a VIP user, a hot
// item); every other key gets the limiter's. An exception's state lives in
// the same map under the same memory rules.
//
// rate must be positive (or [Inf], which allows everything and stores
// nothing); burst >= 1. Options read: [WithClock], [WithMaxKeys],
// [WithShards], [WithException].
type Keyed struct {
	g         gcra
	unlimited bool
	exc       map[string]*keyedLimit // nil without exceptions
	clock     nanoClock
	seed      maphash.Seed
	shards    []keyedShard
	mask      uint64
	perShard  int
}

// keyedLimit is the limit of the keys given by [WithException].
type keyedLimit struct {
	g         gcra
	unlimited bool
}

type keyedShard struct {
	mu        sync.RWMutex
	m         map[string]*atomic.Int64
	nextSweep int
	sinceFull int
	_         [40]byte
}

// NewKeyed returns a keyed limiter of burst tokens per key refilled at rate
// per second.
func NewKeyed(rate Limit, burst int, opts ...KeyedOption) (*Keyed, error) {
	o := buildOptions(opts, KeyedOption.applyKeyed)
	if err := o.checkCollaborators(); err != nil {
		return nil, err
	}
	if float64(rate) == 0 {
		return nil, fmt.Errorf("%w: keyed rate must be > 0 (or Inf)", ErrInvalidConfig)
	}
	g, mode, err := newGCRA(rate, burst)
	if err != nil {
		return nil, err
	}
	if o.maxKeys < 1 {
		return nil, fmt.Errorf("%w: max keys %d must be >= 1", ErrInvalidConfig, o.maxKeys)
	}
	if o.shards < 1 || o.shards > 1<<16 {
		return nil, fmt.Errorf("%w: shards %d must be in [1, 65536]", ErrInvalidConfig, o.shards)
	}
	ns := 1
	for ns < o.shards {
		ns <<= 1
	}
	for ns > 1 && o.maxKeys/ns < 8 {
		ns >>= 1 // keep at least 8 keys per shard so the cap is honoured
	}
	exc, err := newExceptions(o.exceptions)
	if err != nil {
		return nil, err
	}
	k := &Keyed{
		exc:       exc,
		g:         g,
		unlimited: mode == modeUnlimited,
		clock:     toNanoClock(o.clock),
		seed:      maphash.MakeSeed(),
		shards:    make([]keyedShard, ns),
		mask:      uint64(ns - 1),
		perShard:  o.maxKeys / ns,
	}
	for i := range k.shards {
		k.shards[i].m = make(map[string]*atomic.Int64)
		k.shards[i].nextSweep = 64
	}
	return k, nil
}

func newExceptions(m map[string]keyLimit) (map[string]*keyedLimit, error) {
	if len(m) == 0 {
		return nil, nil
	}
	exc := make(map[string]*keyedLimit, len(m))
	for key, l := range m {
		if key == "" {
			return nil, fmt.Errorf("%w: exception for an empty key", ErrInvalidConfig)
		}
		if float64(l.rate) == 0 {
			return nil, fmt.Errorf("%w: exception %q: rate must be > 0 (or Inf)", ErrInvalidConfig, key)
		}
		g, mode, err := newGCRA(l.rate, l.burst)
		if err != nil {
			return nil, fmt.Errorf("exception %q: %w", key, err)
		}
		exc[key] = &keyedLimit{g: g, unlimited: mode == modeUnlimited}
	}
	return exc, nil
}

// limitOf returns the limit of key: its exception's, or the limiter's.
func (k *Keyed) limitOf(key string) (*gcra, bool) {
	if k.exc != nil {
		if l := k.exc[key]; l != nil {
			return &l.g, l.unlimited
		}
	}
	return &k.g, k.unlimited
}

// Allow reports whether one event for key may happen now, spending it if
// so. It is the allocation-free fast path of AllowN.
func (k *Keyed) Allow(key string) bool {
	g, unlimited := k.limitOf(key)
	if unlimited {
		return true
	}
	ok, _ := k.take(g, k.clock.nanotime()<<tickShift, key, 1)
	return ok
}

// AllowN implements [Limiter]. The error is non-nil only for a bad n
// ([ErrInvalidArgument]); ctx is unused (no I/O).
func (k *Keyed) AllowN(_ context.Context, key string, n int) (Result, error) {
	return k.decide(k.clock.nanotime()<<tickShift, key, n)
}

func (k *Keyed) decide(now int64, key string, n int) (Result, error) {
	g, unlimited := k.limitOf(key)
	if n < 1 || (!unlimited && n > g.burst) {
		return Result{Limit: g.burst}, fmt.Errorf("%w: %d (limit %d)", ErrInvalidArgument, n, g.burst)
	}
	if unlimited {
		return Result{Allowed: true, Limit: g.burst, Remaining: math.MaxInt32}, nil
	}
	ok, tat := k.take(g, now, key, n)
	return g.result(now, tat, n, ok), nil
}

func (k *Keyed) shard(key string) *keyedShard {
	return &k.shards[maphash.String(k.seed, key)&k.mask]
}

func (k *Keyed) take(g *gcra, now int64, key string, n int) (bool, int64) {
	s := k.shard(key)
	for {
		s.mu.RLock()
		p := s.m[key]
		s.mu.RUnlock()
		if p == nil {
			p = s.insert(key, now, k.perShard)
		}
		ok, tat, dead := g.take(p, now, n)
		if !dead {
			return ok, tat
		}
	}
}

func (s *keyedShard) insert(key string, now int64, limit int) *atomic.Int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.m[key]; p != nil {
		return p
	}
	if len(s.m) >= s.nextSweep || (len(s.m) >= limit && s.sinceFull >= limit/4) {
		s.sweep(now)
		s.sinceFull = 0
		s.nextSweep = max(2*len(s.m), 64)
	}
	if len(s.m) >= limit {
		s.evictOne(now)
		s.sinceFull++
	}
	p := new(atomic.Int64)
	p.Store(tatFull)
	s.m[key] = p
	return p
}

// sweep drops every full bucket. The CAS to tatDead makes a concurrent
// taker that still holds the pointer retry through the map.
func (s *keyedShard) sweep(now int64) {
	for key, p := range s.m {
		if old := p.Load(); old <= now && p.CompareAndSwap(old, tatDead) {
			delete(s.m, key)
		}
	}
}

func (s *keyedShard) evictOne(now int64) {
	var victim string
	var vp *atomic.Int64
	best := int64(math.MaxInt64)
	i := 0
	for key, p := range s.m { // map iteration starts at a random entry
		if t := p.Load(); t < best {
			best, victim, vp = t, key, p
		}
		if i++; i == 8 {
			break
		}
	}
	if vp != nil {
		vp.Store(tatDead)
		delete(s.m, victim)
	}
	_ = now
}

// RefundN implements [Refunder]: it gives n tokens back to key (never
// beyond full). Refunding an evicted key is a no-op.
func (k *Keyed) RefundN(_ context.Context, key string, n int) error {
	g, unlimited := k.limitOf(key)
	if unlimited || n < 1 {
		return nil
	}
	s := k.shard(key)
	s.mu.RLock()
	p := s.m[key]
	s.mu.RUnlock()
	if p != nil {
		g.give(p, k.clock.nanotime()<<tickShift, n)
	}
	return nil
}

// Len returns the number of keys currently held.
func (k *Keyed) Len() int {
	n := 0
	for i := range k.shards {
		s := &k.shards[i]
		s.mu.RLock()
		n += len(s.m)
		s.mu.RUnlock()
	}
	return n
}
