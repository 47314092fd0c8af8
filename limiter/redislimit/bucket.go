package redislimit

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckillkit/seckill/limiter"
)

// Bucket is a token bucket per key kept in Redis (GCRA: one string
// per key holding its theoretical arrival time), shared by every app
// server. With one constant key it is the cluster-wide global limit: all
// instances draw from one budget of burst tokens refilled at rate per
// second. It implements [limiter.Limiter] and [limiter.Refunder] and is safe for concurrent
// use.
//
// # Accuracy
//
// Exact: decisions are serialized by Redis on Redis TIME, so the cluster as
// a whole never admits more than burst + rate*t events in any interval t.
// The key expires once the bucket is full again. A single global key lives
// in one Cluster slot, so a global limit is bounded by one Redis node's
// throughput (about 100k decisions/s); put it after the per-user limits in
// a [limiter.Chain] so refused users never reach it.
//
// One EVALSHA per decision, one key per script (Cluster-safe); Redis >= 5.
// When Redis fails, the [limiter.FailurePolicy] decides; the default fallback is
// one in-process [limiter.Keyed] bucket per key with the same rate and burst — per
// process, so N instances admit up to N times the budget while Redis is
// down (give [WithFallback] a bucket of rate/N to keep the sum).
type Bucket struct {
	redisBase
	rate        limiter.Limit
	allow       *batcher
	argInterval any
	argBurst    any
}

// NewBucket returns a Redis token bucket of burst tokens refilled at
// rate per second per key. rate must be positive and finite, burst >= 1,
// and neither above 2^53-1 (the script's numbers are Lua doubles).
// Options read: [WithKeyPrefix], [WithName], [WithFailurePolicy],
// [WithFallback], [WithOnFailure], [WithLogger], [WithBatching],
// [WithObserver], [WithException].
func NewBucket(rdb redis.Scripter, rate limiter.Limit, burst int, opts ...Option) (*Bucket, error) {
	o := buildOptions(opts)
	b := &Bucket{redisBase: redisBase{rdb: rdb, o: o, obs: o.observer, limit: burst}, rate: rate}
	if err := b.validate(); err != nil {
		return nil, err
	}
	r := float64(rate)
	if math.IsNaN(r) || math.IsInf(r, 0) || r <= 0 {
		return nil, fmt.Errorf("%w: redis bucket rate %v must be positive and finite", limiter.ErrInvalidConfig, r)
	}
	if r > maxScriptInt {
		return nil, fmt.Errorf("%w: redis bucket rate %v is above %d: %s", limiter.ErrInvalidConfig, r, int64(maxScriptInt), whyMaxScriptInt)
	}
	if burst < 1 {
		return nil, fmt.Errorf("%w: burst %d must be >= 1", limiter.ErrInvalidConfig, burst)
	}
	if int64(burst) > maxScriptInt {
		return nil, fmt.Errorf("%w: burst %d is above %d: %s", limiter.ErrInvalidConfig, burst, int64(maxScriptInt), whyMaxScriptInt)
	}
	interval := 1e6 / r // µs per token
	if interval*float64(burst) > 1e15 {
		return nil, fmt.Errorf("%w: rate %v with burst %d spans too long a time", limiter.ErrInvalidConfig, r, burst)
	}
	fbExc, err := b.exceptions(func(key string, l int) (keyArgs, limiter.Limit, error) {
		kr := r * float64(l) / float64(burst)
		if l < 1 || int64(l) > maxScriptInt || kr > maxScriptInt {
			return keyArgs{}, 0, fmt.Errorf("%w: exception %q: burst %d (rate %v) must be in [1, %d]", limiter.ErrInvalidConfig, key, l, kr, int64(maxScriptInt))
		}
		ki := interval * float64(burst) / float64(l) // the same time to fill
		return keyArgs{limit: l, argLimit: strconv.Itoa(l), argInterval: strconv.FormatFloat(ki, 'f', -1, 64)}, limiter.Limit(kr), nil
	})
	if err != nil {
		return nil, err
	}
	if o.policy == limiter.FallbackLocal && !o.fallbackSet {
		k, err := limiter.NewKeyed(rate, burst, fbExc...)
		if err != nil {
			return nil, err
		}
		b.fallback = k
	} else {
		b.fallback = o.fallback
	}
	b.allow = newBatcher(rdb, gcraScript, o.batch)
	b.argInterval = strconv.FormatFloat(interval, 'f', -1, 64) // 'f': gopher-lua (miniredis) reads "1e+06" as nil
	b.argBurst = strconv.Itoa(burst)
	return b, nil
}

// AllowN implements [limiter.Limiter]: it takes n tokens from key's bucket if they
// are there, else refuses and takes nothing.
func (b *Bucket) AllowN(ctx context.Context, key string, n int) (limiter.Result, error) {
	if b.obs == nil {
		return b.allowN(ctx, key, n)
	}
	start := time.Now()
	r, err := b.allowN(ctx, key, n)
	b.observeAllow(ctx, start, r, err)
	return r, err
}

func (b *Bucket) allowN(ctx context.Context, key string, n int) (limiter.Result, error) {
	limit, argInterval, argBurst := b.args(key)
	if n < 1 || n > limit {
		return limiter.Result{Limit: limit}, fmt.Errorf("%w: %d (burst %d)", limiter.ErrInvalidArgument, n, limit)
	}
	argN := argOne
	if n != 1 {
		argN = strconv.Itoa(n)
	}
	v, err := b.allow.run(ctx, bucketKey(b.o.prefix, b.o.name, key), argInterval, argBurst, argN)
	r, err := parseDecision(v, err, limit)
	if err != nil {
		return b.failed(ctx, key, n, err)
	}
	return r, nil
}

// args returns key's burst and script arguments ([WithException]).
func (b *Bucket) args(key string) (int, any, any) {
	if e, ok := b.exc[key]; ok {
		return e.limit, e.argInterval, e.argLimit
	}
	return b.limit, b.argInterval, b.argBurst
}

// RefundN implements [limiter.Refunder]: it puts n tokens back (never beyond
// full). n above 2^53-1 is an error wrapping [limiter.ErrInvalidArgument] and gives
// nothing back. A failure is reported to [WithOnFailure] and returned, wrapping
// [limiter.ErrUnavailable].
func (b *Bucket) RefundN(ctx context.Context, key string, n int) error {
	if n < 1 {
		return nil
	}
	if err := checkScriptN(n); err != nil {
		return err
	}
	_, argInterval, argBurst := b.args(key)
	err := gcraScript.Run(ctx, b.rdb, []string{bucketKey(b.o.prefix, b.o.name, key)},
		argInterval, argBurst, -n).Err()
	if err != nil {
		err = fmt.Errorf("%w: refund %s %q: %w", limiter.ErrUnavailable, b.o.name, key, err)
		if b.o.onFailure != nil {
			b.o.onFailure(ctx, key, err)
		}
		return err
	}
	return nil
}
