package limiter

import (
	"fmt"
	"reflect"
)

// Options belong to one constructor: each constructor takes its own option
// interface, whose one method is unexported (so options come from the
// With… functions only), and an option that means nothing to a constructor
// does not compile there (WithMaxKeys is a [KeyedOption] only, so it cannot
// be handed to [NewTokenBucket]). An option that applies to several
// constructors returns a type that implements each of their interfaces:
//
//	option                               TokenBucket  Keyed  Middleware
//	WithClock (ClockOption)              ✓            ✓
//	WithMaxKeys, WithShards, WithException            ✓
//	WithKeyFailurePolicy, WithOnDenied,                      ✓
//	WithOnError, WithObserver
//
// The Redis limiters (package redislimit) have their own options. A nil
// option is ignored.
type (
	// TokenBucketOption configures [NewTokenBucket].
	TokenBucketOption interface{ applyTokenBucket(*options) }
	// KeyedOption configures [NewKeyed].
	KeyedOption interface{ applyKeyed(*options) }
	// MiddlewareOption configures [NewMiddleware].
	MiddlewareOption interface{ applyMiddleware(*mwOptions) }
)

// ClockOption is returned by [WithClock]; it applies to [NewTokenBucket]
// and [NewKeyed].
type ClockOption interface {
	TokenBucketOption
	KeyedOption
}

// clockOpt, keyedOpt and mwOpt implement the option interfaces: each only
// those of the constructors its options apply to.
type (
	clockOpt func(*options)
	keyedOpt func(*options)
	mwOpt    func(*mwOptions)
)

func (f clockOpt) applyTokenBucket(o *options) { f(o) }
func (f clockOpt) applyKeyed(o *options)       { f(o) }
func (f keyedOpt) applyKeyed(o *options)       { f(o) }
func (f mwOpt) applyMiddleware(o *mwOptions)   { f(o) }

type options struct {
	clock      Clock
	clockSet   bool
	maxKeys    int
	shards     int
	exceptions map[string]keyLimit
}

// keyLimit is the rate and burst given to one key by [WithException].
type keyLimit struct {
	rate  Limit
	burst int
}

// buildOptions applies opts (nil ones are ignored) with apply, the method
// of the constructor's option interface.
func buildOptions[O comparable](opts []O, apply func(O, *options)) options {
	o := options{maxKeys: 1 << 20, shards: 64}
	var zero O
	for _, opt := range opts {
		if opt != zero {
			apply(opt, &o)
		}
	}
	return o
}

// WithClock sets the clock of the in-process limiters ([TokenBucket],
// [Keyed]). Default: the runtime's monotonic clock (see [CoarseClock] for a
// faster one). A nil c is a nil collaborator: the constructor returns an
// error wrapping [ErrInvalidConfig].
func WithClock(c Clock) ClockOption {
	return clockOpt(func(o *options) { o.clock, o.clockSet = c, true })
}

// checkCollaborators refuses a nil collaborator handed to an option.
func (o *options) checkCollaborators() error {
	if o.clockSet && isNil(o.clock) {
		return fmt.Errorf("%w: nil clock", ErrInvalidConfig)
	}
	return nil
}

// WithMaxKeys caps the number of keys a [Keyed] limiter holds. Default
// 1<<20 (about 64 MiB at worst). See [Keyed] for what happens at the cap.
func WithMaxKeys(n int) KeyedOption { return keyedOpt(func(o *options) { o.maxKeys = n }) }

// WithShards sets the number of lock shards of a [Keyed] limiter (rounded
// up to a power of two). Default 64.
func WithShards(n int) KeyedOption { return keyedOpt(func(o *options) { o.shards = n }) }

// WithException gives one key of a [Keyed] limiter its own rate and burst
// instead of the limiter's (a VIP user, a hot item: Sentinel's
// hot-parameter exceptions). Give it once per key; given twice for one key,
// the last wins. The same rules hold as for [NewKeyed]: rate > 0 or [Inf]
// (that key is not limited), burst >= 1 for a finite rate; an empty key or
// a bad rate or burst makes [NewKeyed] return an error wrapping
// [ErrInvalidConfig]. Default: no exception.
func WithException(key string, rate Limit, burst int) KeyedOption {
	return keyedOpt(func(o *options) {
		if o.exceptions == nil {
			o.exceptions = make(map[string]keyLimit)
		}
		o.exceptions[key] = keyLimit{rate: rate, burst: burst}
	})
}

// isNil reports whether v is nil or an interface holding a nil pointer
// (a (*Keyed)(nil) passed as a Limiter).
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
