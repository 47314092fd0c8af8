package redislimit

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/seckillkit/seckill/internal/fused"

	"github.com/redis/go-redis/v9"

	"github.com/seckillkit/seckill/limiter"
)

// maxWindowLimit caps the per-window limit: the sliding log holds one
// sorted-set member per allowed event.
const maxWindowLimit = 1 << 20

// SlidingWindow allows at most limit events per key in any window of the
// given length, shared by every app server through Redis. It implements
// [limiter.Limiter] and [limiter.Refunder] and is safe for concurrent use.
//
// # Accuracy
//
// It is an exact sliding log: one sorted-set member per allowed event,
// scored by Redis TIME in microseconds. An event is counted by every window
// (t-window, t] that contains it, so no window of that length ever holds
// more than limit allowed events — there is no boundary burst (a fixed
// window allows 2×limit around its boundary; a sliding counter, which
// weights the previous fixed window, approaches 2×limit over a window
// straddling two buckets in the worst case). Refused events are not
// recorded. The price is memory: up to limit members (~40 bytes each) per
// active key, expired with the window; limits are capped at 1<<20. For big
// budgets (a global limit of thousands per second) use [Bucket].
//
// # Redis
//
// One EVALSHA per decision (EVAL after a script cache flush), one key per
// script, so it works on Redis Cluster; "now" is Redis TIME, so app server
// clocks do not matter. Requires Redis >= 5 (scripts with TIME then writes
// are replicated by effects). When Redis fails, the [limiter.FailurePolicy] decides.
type SlidingWindow struct {
	redisBase
	window    time.Duration
	allow     *batcher
	argWindow any
	argLimit  any
}

// NewSlidingWindow returns a limiter of limit events per window per key.
// The window is kept in microseconds and must be at least 1 ms. Options
// read: [WithKeyPrefix], [WithName], [WithFailurePolicy], [WithFallback],
// [WithOnFailure], [WithLogger], [WithBatching], [WithObserver],
// [WithException].
func NewSlidingWindow(rdb redis.Scripter, limit int, window time.Duration, opts ...Option) (*SlidingWindow, error) {
	o := buildOptions(opts)
	s := &SlidingWindow{redisBase: redisBase{rdb: rdb, o: o, obs: o.observer, limit: limit}, window: window}
	if err := s.validate(); err != nil {
		return nil, err
	}
	if limit < 1 || limit > maxWindowLimit {
		return nil, fmt.Errorf("%w: limit %d must be in [1, %d]", limiter.ErrInvalidConfig, limit, maxWindowLimit)
	}
	if window < time.Millisecond {
		return nil, fmt.Errorf("%w: window %v must be >= 1ms", limiter.ErrInvalidConfig, window)
	}
	fbExc, err := s.exceptions(func(key string, l int) (keyArgs, limiter.Limit, error) {
		if l < 1 || l > maxWindowLimit {
			return keyArgs{}, 0, fmt.Errorf("%w: exception %q: limit %d must be in [1, %d]", limiter.ErrInvalidConfig, key, l, maxWindowLimit)
		}
		return keyArgs{limit: l, argLimit: strconv.Itoa(l)}, limiter.Per(l, window), nil
	})
	if err != nil {
		return nil, err
	}
	if o.policy == limiter.FallbackLocal && !o.fallbackSet {
		k, err := limiter.NewKeyed(limiter.Per(limit, window), limit, fbExc...)
		if err != nil {
			return nil, err
		}
		s.fallback = k
	} else {
		s.fallback = o.fallback
	}
	s.allow = newBatcher(rdb, slidingWindowScript, o.batch)
	s.argWindow = strconv.FormatInt(window.Microseconds(), 10)
	s.argLimit = strconv.Itoa(limit)
	return s, nil
}

var argOne any = "1"

// AllowN implements [limiter.Limiter]: it records n events for key if the window
// has room for them, else refuses and records nothing.
func (s *SlidingWindow) AllowN(ctx context.Context, key string, n int) (limiter.Result, error) {
	if s.obs == nil {
		return s.allowN(ctx, key, n)
	}
	start := time.Now()
	r, err := s.allowN(ctx, key, n)
	s.observeAllow(ctx, start, r, err)
	return r, err
}

func (s *SlidingWindow) allowN(ctx context.Context, key string, n int) (limiter.Result, error) {
	limit, argLimit := s.args(key)
	if n < 1 || n > limit {
		return limiter.Result{Limit: limit}, fmt.Errorf("%w: %d (limit %d)", limiter.ErrInvalidArgument, n, limit)
	}
	argN := argOne
	if n != 1 {
		argN = strconv.Itoa(n)
	}
	v, err := s.allow.run(ctx, windowKey(s.o.prefix, s.o.name, key), s.argWindow, argLimit, argN)
	r, err := parseDecision(v, err, limit)
	if err != nil {
		return s.failed(ctx, key, n, err)
	}
	return r, nil
}

// args returns key's limit and its script argument ([WithException]).
func (s *SlidingWindow) args(key string) (int, any) {
	if e, ok := s.exc[key]; ok {
		return e.limit, e.argLimit
	}
	return s.limit, s.argLimit
}

// AllowCheck is [SlidingWindow.AllowN] of one event as a check a composer
// runs in one script with other blocks' checks (package fused): the same
// Lua, the same decisions; a malformed reply meets the failure policy, as
// in AllowN, and the observer hears it. It passes when the event was
// recorded.
func (s *SlidingWindow) AllowCheck(key string) fused.Check[limiter.Result] {
	start := time.Now()
	limit, argLimit := s.args(key)
	return fused.Check[limiter.Result]{Lua: slidingWindowLua, Keys: []string{windowKey(s.o.prefix, s.o.name, key)},
		Args: []any{s.argWindow, argLimit, argOne}, Pass: "r[1] == 1",
		Decode: func(ctx context.Context, v any) (limiter.Result, error) {
			r, err := parseDecision(v, nil, limit)
			if err != nil {
				r, err = s.failed(ctx, key, 1, err)
			}
			if s.obs != nil {
				s.observeAllow(ctx, start, r, err)
			}
			return r, err
		}}
}

// RefundN implements [limiter.Refunder]: it removes the n newest events of key's
// log (any n recent events count the same for later decisions). n above
// 2^53-1 is an error wrapping [limiter.ErrInvalidArgument] and removes nothing. It never
// applies the failure policy: a failure is reported to [WithOnFailure] and
// returned, wrapping [limiter.ErrUnavailable].
func (s *SlidingWindow) RefundN(ctx context.Context, key string, n int) error {
	if n < 1 {
		return nil
	}
	if err := checkScriptN(n); err != nil {
		return err
	}
	err := slidingWindowRefundScript.Run(ctx, s.rdb, []string{windowKey(s.o.prefix, s.o.name, key)}, n).Err()
	if err != nil {
		err = fmt.Errorf("%w: refund %s %q: %w", limiter.ErrUnavailable, s.o.name, key, err)
		if s.o.onFailure != nil {
			s.o.onFailure(ctx, key, err)
		}
		return err
	}
	return nil
}
