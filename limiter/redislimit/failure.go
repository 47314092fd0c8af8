package redislimit

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckillkit/seckill/internal/observe"
	"github.com/seckillkit/seckill/limiter"
)

// redisBase is what the Redis limiters share: the client, options, the
// failure policy and its fallback.
type redisBase struct {
	rdb      redis.Scripter
	o        options
	fallback limiter.Limiter
	limit    int
	obs      observe.Observer   // nil: nothing is measured
	exc      map[string]keyArgs // WithException; nil without
}

// keyArgs are the script arguments of a key given by [WithException].
type keyArgs struct {
	limit       int
	argLimit    any // the window's limit, the bucket's burst
	argInterval any // Bucket only: µs per token
}

// limitOf returns key's limit: its exception's, or the limiter's.
func (b *redisBase) limitOf(key string) int {
	if e, ok := b.exc[key]; ok {
		return e.limit
	}
	return b.limit
}

// exceptions builds the keyArgs of every [WithException] with mk, and the
// per-key options of the default fallback.
func (b *redisBase) exceptions(mk func(key string, limit int) (keyArgs, limiter.Limit, error)) ([]limiter.KeyedOption, error) {
	if len(b.o.exceptions) == 0 {
		return nil, nil
	}
	b.exc = make(map[string]keyArgs, len(b.o.exceptions))
	var fb []limiter.KeyedOption
	for key, limit := range b.o.exceptions {
		a, rate, err := mk(key, limit)
		if err != nil {
			return nil, err
		}
		b.exc[key] = a
		fb = append(fb, limiter.WithException(key, rate, limit))
	}
	return fb, nil
}

// failed applies the failure policy to a failed store call.
func (b *redisBase) failed(ctx context.Context, key string, n int, cause error) (limiter.Result, error) {
	return b.failedTo(ctx, key, n, cause, b.fallback, key)
}

// failedTo is failed with the [limiter.FallbackLocal] decision asked of fb
// for fbKey (a [Priority] asks its in-process classes for the class).
func (b *redisBase) failedTo(ctx context.Context, key string, n int, cause error, fb limiter.Limiter, fbKey string) (limiter.Result, error) {
	if ctx.Err() != nil && (errors.Is(cause, context.Canceled) || errors.Is(cause, context.DeadlineExceeded)) {
		// The caller gave up: not a store failure, no policy, no hook.
		return limiter.Result{Limit: b.limitOf(key)}, fmt.Errorf("redislimit: %s %q: %w", b.o.name, key, cause)
	}
	err := fmt.Errorf("%w: %s %q: %w", limiter.ErrUnavailable, b.o.name, key, cause)
	if b.o.onFailure != nil {
		b.o.onFailure(ctx, key, err)
	}
	b.o.logger.Warn("redislimit: redis failed", "limiter", b.o.name, "key", key,
		"policy", b.o.policy.String(), "err", err)
	switch b.o.policy {
	case limiter.FailOpen:
		limit := b.limitOf(key)
		return limiter.Result{Allowed: true, Limit: limit, Remaining: max(limit-n, 0), Degraded: true}, nil
	case limiter.FallbackLocal:
		r, ferr := fb.AllowN(ctx, fbKey, n)
		r.Degraded = true
		return r, ferr
	default:
		return limiter.Result{Limit: b.limitOf(key)}, err
	}
}

func (b *redisBase) validate() error {
	if isNil(b.rdb) {
		return fmt.Errorf("%w: nil redis client", limiter.ErrInvalidConfig)
	}
	if err := b.o.checkCollaborators(); err != nil {
		return err
	}
	switch b.o.policy {
	case limiter.FailClosed, limiter.FailOpen, limiter.FallbackLocal:
	default:
		return fmt.Errorf("%w: unknown failure policy %d", limiter.ErrInvalidConfig, int(b.o.policy))
	}
	if b.o.name == "" {
		return fmt.Errorf("%w: empty name", limiter.ErrInvalidConfig)
	}
	return nil
}

// isNil reports whether v is nil or an interface holding a nil pointer
// (a (*redis.Client)(nil) passed as a redis.Scripter).
func isNil(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Func, reflect.Interface, reflect.Slice, reflect.Chan:
		return rv.IsNil()
	}
	return false
}

// maxScriptInt is the largest integer a Redis script holds exactly: Lua
// numbers are doubles, so a rate, burst, limit or cost above it would be
// rounded inside the script and the limit would silently differ from the
// one configured. The Redis limiters refuse such values in Go.
const maxScriptInt = 1<<53 - 1

const whyMaxScriptInt = "Redis scripts compute in doubles, exact only up to 2^53-1"

// checkScriptN refuses a cost the scripts cannot hold exactly.
func checkScriptN(n int) error {
	if int64(n) > maxScriptInt {
		return fmt.Errorf("%w: %d is above %d: %s", limiter.ErrInvalidArgument, n, int64(maxScriptInt), whyMaxScriptInt)
	}
	return nil
}

// parseDecision checks the 4-integer reply shared by the scripts.
func parseDecision(v any, err error, limit int) (limiter.Result, error) {
	if err != nil {
		return limiter.Result{}, err
	}
	a, ok := v.([]any)
	if !ok || len(a) != 4 {
		return limiter.Result{}, fmt.Errorf("%w: %T %v", ErrBadReply, v, v)
	}
	var x [4]int64
	for i := range a {
		if x[i], ok = a[i].(int64); !ok {
			return limiter.Result{}, fmt.Errorf("%w: element %d is %T", ErrBadReply, i, a[i])
		}
	}
	return limiter.Result{
		Allowed:    x[0] == 1,
		Limit:      limit,
		Remaining:  int(max(x[1], 0)),
		RetryAfter: time.Duration(max(x[2], 0)) * time.Microsecond,
		ResetAfter: time.Duration(max(x[3], 0)) * time.Microsecond,
	}, nil
}
