package limiter

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/seckillkit/seckill/observe"
)

// Options belong to one constructor: each constructor takes its own option
// interface, whose one method is unexported (so options come from the
// With… functions only), and an option that means nothing to a constructor
// does not compile there (WithMaxKeys is a [KeyedOption] only, so it cannot
// be handed to [NewSlidingWindow]). An option that applies to several
// constructors returns a type that implements each of their interfaces:
//
//	option                               TokenBucket  Keyed  SlidingWindow  RedisBucket  Middleware
//	WithClock (ClockOption)              ✓            ✓      ✓ (fallback)   ✓ (fallback)
//	WithMaxKeys, WithShards                           ✓
//	WithKeyPrefix, WithName,                                 ✓              ✓
//	WithFailurePolicy, WithFallback,
//	WithOnFailure, WithObserver,
//	WithLogger, WithBatching
//	(RedisOption)
//	WithKeyFailurePolicy, WithOnDenied,                                                  ✓
//	WithOnError, WithMiddlewareObserver
//
// A nil option is ignored.
type (
	// TokenBucketOption configures [NewTokenBucket].
	TokenBucketOption interface{ applyTokenBucket(*options) }
	// KeyedOption configures [NewKeyed].
	KeyedOption interface{ applyKeyed(*options) }
	// SlidingWindowOption configures [NewSlidingWindow].
	SlidingWindowOption interface{ applySlidingWindow(*options) }
	// RedisBucketOption configures [NewRedisBucket].
	RedisBucketOption interface{ applyRedisBucket(*options) }
	// MiddlewareOption configures [NewMiddleware].
	MiddlewareOption interface{ applyMiddleware(*mwOptions) }
)

// ClockOption is returned by [WithClock]; it applies to every limiter
// constructor.
type ClockOption interface {
	TokenBucketOption
	KeyedOption
	SlidingWindowOption
	RedisBucketOption
}

// RedisOption is returned by the options of the Redis limiters
// ([SlidingWindow], [RedisBucket]).
type RedisOption interface {
	SlidingWindowOption
	RedisBucketOption
}

// clockOpt, redisOpt, keyedOpt and mwOpt implement the option interfaces:
// each only those of the constructors its options apply to.
type (
	clockOpt func(*options)
	redisOpt func(*options)
	keyedOpt func(*options)
	mwOpt    func(*mwOptions)
)

func (f clockOpt) applyTokenBucket(o *options)   { f(o) }
func (f clockOpt) applyKeyed(o *options)         { f(o) }
func (f clockOpt) applySlidingWindow(o *options) { f(o) }
func (f clockOpt) applyRedisBucket(o *options)   { f(o) }
func (f redisOpt) applySlidingWindow(o *options) { f(o) }
func (f redisOpt) applyRedisBucket(o *options)   { f(o) }
func (f keyedOpt) applyKeyed(o *options)         { f(o) }
func (f mwOpt) applyMiddleware(o *mwOptions)     { f(o) }

type options struct {
	clock       Clock
	clockSet    bool
	prefix      string
	name        string
	policy      FailurePolicy
	fallback    Limiter
	fallbackSet bool
	onFailure   func(ctx context.Context, key string, err error)
	observer    observe.Observer
	logger      *slog.Logger
	loggerSet   bool
	maxKeys     int
	shards      int
	batch       int
}

func defaultOptions() options {
	return options{
		prefix:  "seckill:",
		name:    "default",
		policy:  FailClosed,
		maxKeys: 1 << 20,
		shards:  64,
		batch:   4,
	}
}

// buildOptions applies opts (nil ones are ignored) with apply, the method
// of the constructor's option interface.
func buildOptions[O comparable](opts []O, apply func(O, *options)) options {
	o := defaultOptions()
	var zero O
	for _, opt := range opts {
		if opt != zero {
			apply(opt, &o)
		}
	}
	if !o.loggerSet {
		o.logger = slog.Default()
	}
	return o
}

// WithClock sets the clock of the in-process limiters ([TokenBucket],
// [Keyed]). Default: the runtime's monotonic clock (see [CoarseClock] for a
// faster one). The Redis limiters' own "now" is Redis TIME; given to them,
// the clock is that of their default local fallback ([FallbackLocal]
// without [WithFallback]).
// A nil c is a nil collaborator: the constructor returns an error wrapping
// [ErrInvalidConfig].
func WithClock(c Clock) ClockOption {
	return clockOpt(func(o *options) { o.clock, o.clockSet = c, true })
}

// checkCollaborators refuses a nil collaborator handed to an option.
func (o *options) checkCollaborators() error {
	if o.clockSet && isNil(o.clock) {
		return fmt.Errorf("%w: nil clock", ErrInvalidConfig)
	}
	if o.fallbackSet && isNil(o.fallback) {
		return fmt.Errorf("%w: nil fallback limiter", ErrInvalidConfig)
	}
	if o.loggerSet && o.logger == nil {
		return fmt.Errorf("%w: nil logger", ErrInvalidConfig)
	}
	return nil
}

// localOptions passes the clock of a Redis limiter on to its default
// local fallback.
func (o *options) localOptions() []KeyedOption {
	if o.clock == nil {
		return nil
	}
	return []KeyedOption{WithClock(o.clock)}
}

// WithKeyPrefix sets the prefix of every Redis key ([SlidingWindow],
// [RedisBucket]). Default "seckill:".
func WithKeyPrefix(p string) RedisOption { return redisOpt(func(o *options) { o.prefix = p }) }

// WithName names the limiter; the name is part of its Redis keys so that
// two limiters sharing a prefix never share state ([SlidingWindow],
// [RedisBucket]). Default "default".
func WithName(n string) RedisOption { return redisOpt(func(o *options) { o.name = n }) }

// WithFailurePolicy chooses what a Redis limiter answers when Redis fails
// ([SlidingWindow], [RedisBucket]). Default [FailClosed]. A limiter whose
// policy is not FailClosed decides Redis failures itself: do not wrap it in
// a circuit breaker (see the package doc, "One failure policy per call").
func WithFailurePolicy(p FailurePolicy) RedisOption {
	return redisOpt(func(o *options) { o.policy = p })
}

// WithFallback sets the limiter consulted under [FallbackLocal]. Default: a
// [Keyed] token bucket per key with the same limit and period as the Redis
// limiter — per process, so with N instances the cluster admits up to N
// times the limit while Redis is down. A nil l is a nil collaborator: the
// constructor returns an error wrapping [ErrInvalidConfig].
func WithFallback(l Limiter) RedisOption {
	return redisOpt(func(o *options) { o.fallback, o.fallbackSet = l, true })
}

// WithOnFailure sets a hook called once for every Redis failure, whatever
// the policy, with the caller's ctx (that of AllowN or RefundN; a refund
// made by [Chain] passes the Chain ctx without its cancellation), the key
// and the error (which wraps [ErrUnavailable]). It is called synchronously,
// outside any lock. Default: none.
func WithOnFailure(f func(ctx context.Context, key string, err error)) RedisOption {
	return redisOpt(func(o *options) { o.onFailure = f })
}

// WithObserver reports every decision of a Redis limiter ([SlidingWindow],
// [RedisBucket]) to o as the stage "limiter.allow", synchronously, with the
// caller's ctx and Name set to [WithName] (see [StageAllow] for the
// outcomes). A nil o is ignored. Without an observer nothing is measured.
// Default: none.
func WithObserver(o observe.Observer) RedisOption {
	return redisOpt(func(opts *options) {
		if o != nil {
			opts.observer = o
		}
	})
}

// WithLogger sets a logger for Redis failures (logged at Warn) of a Redis
// limiter ([SlidingWindow], [RedisBucket]). A nil l is an error wrapping
// [ErrInvalidConfig]; to silence the limiter pass
// slog.New(slog.DiscardHandler). Default: [slog.Default].
func WithLogger(l *slog.Logger) RedisOption {
	return redisOpt(func(o *options) { o.logger, o.loggerSet = l, true })
}

// WithMaxKeys caps the number of keys a [Keyed] limiter holds. Default
// 1<<20 (about 64 MiB at worst). See [Keyed] for what happens at the cap.
func WithMaxKeys(n int) KeyedOption { return keyedOpt(func(o *options) { o.maxKeys = n }) }

// WithShards sets the number of lock shards of a [Keyed] limiter (rounded
// up to a power of two). Default 64.
func WithShards(n int) KeyedOption { return keyedOpt(func(o *options) { o.shards = n }) }

// WithBatching sets how many pipelines a Redis limiter ([SlidingWindow],
// [RedisBucket]) keeps in flight before it coalesces further concurrent
// decisions into the next pipeline. A decision that finds a free slot is
// sent at once, so an idle limiter adds no latency; under load, decisions
// queued behind busy slots share one round trip, which cuts the system
// calls per decision on both sides. Each decision is still its own
// EVALSHA on its own key. n <= 0 disables batching (one round trip per
// call on the caller's goroutine). Batching needs a client with a
// Pipeline method (Client, ClusterClient, Ring); others run unbatched.
// Default 4.
//
// While batched, a caller whose ctx ends before its decision is taken into
// a pipeline returns ctx.Err(), and that decision is never sent: nothing is
// spent. Once taken, the decision completes within the client's read/write
// timeouts whatever the caller's ctx, and the caller gets its reply, never
// ctx.Err().
func WithBatching(n int) RedisOption { return redisOpt(func(o *options) { o.batch = n }) }
