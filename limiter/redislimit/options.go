package redislimit

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/seckillkit/seckill/internal/observe"
	"github.com/seckillkit/seckill/limiter"
)

// Option configures [NewSlidingWindow] and [NewBucket], which read the
// same options. It is an interface with an unexported method, so options
// come from the With… functions of this package only. A nil option is
// ignored.
type Option interface{ apply(*options) }

type optFunc func(*options)

func (f optFunc) apply(o *options) { f(o) }

type options struct {
	prefix      string
	name        string
	policy      limiter.FailurePolicy
	fallback    limiter.Limiter
	fallbackSet bool
	onFailure   func(ctx context.Context, key string, err error)
	observer    observe.Observer
	logger      *slog.Logger
	loggerSet   bool
	batch       int
	exceptions  map[string]int
}

// buildOptions applies opts (nil ones are ignored) over the defaults.
func buildOptions(opts []Option) options {
	o := options{prefix: "seckill:", name: "default", policy: limiter.FailClosed, batch: 4}
	for _, opt := range opts {
		if opt != nil {
			opt.apply(&o)
		}
	}
	if !o.loggerSet {
		o.logger = slog.Default()
	}
	return o
}

// checkCollaborators refuses a nil collaborator handed to an option.
func (o *options) checkCollaborators() error {
	if o.fallbackSet && isNil(o.fallback) {
		return fmt.Errorf("%w: nil fallback limiter", limiter.ErrInvalidConfig)
	}
	if o.loggerSet && o.logger == nil {
		return fmt.Errorf("%w: nil logger", limiter.ErrInvalidConfig)
	}
	return nil
}

// WithKeyPrefix sets the prefix of every Redis key. Default "seckill:".
func WithKeyPrefix(p string) Option { return optFunc(func(o *options) { o.prefix = p }) }

// WithName names the limiter; the name is part of its Redis keys so that
// two limiters sharing a prefix never share state. Default "default".
func WithName(n string) Option { return optFunc(func(o *options) { o.name = n }) }

// WithFailurePolicy chooses what the limiter answers when Redis fails.
// Default [limiter.FailClosed]. A limiter whose policy is not FailClosed
// decides Redis failures itself: do not wrap it in a circuit breaker (see
// the package doc, "One failure policy per call").
func WithFailurePolicy(p limiter.FailurePolicy) Option {
	return optFunc(func(o *options) { o.policy = p })
}

// WithFallback sets the limiter consulted under [limiter.FallbackLocal].
// Default: a [limiter.Keyed] token bucket per key with the same limit and
// period as the Redis limiter, on the runtime's clock — per process, so
// with N instances the cluster admits up to N times the limit while Redis
// is down. A nil l is a nil collaborator: the constructor returns an error
// wrapping [limiter.ErrInvalidConfig].
func WithFallback(l limiter.Limiter) Option {
	return optFunc(func(o *options) { o.fallback, o.fallbackSet = l, true })
}

// WithOnFailure sets a hook called once for every Redis failure, whatever
// the policy, with the caller's ctx (that of AllowN or RefundN; a refund
// made by [limiter.Chain] passes the Chain ctx without its cancellation),
// the key and the error (which wraps [limiter.ErrUnavailable]). It is
// called synchronously, outside any lock. Default: none.
func WithOnFailure(f func(ctx context.Context, key string, err error)) Option {
	return optFunc(func(o *options) { o.onFailure = f })
}

// WithObserver reports every decision of the limiter to o as the stage
// "limiter.allow", synchronously, with the caller's ctx and Name set to
// [WithName] (see [StageAllow] for the outcomes). A nil o is ignored.
// Without an observer nothing is measured. Default: none.
func WithObserver(o observe.Observer) Option {
	return optFunc(func(opts *options) {
		if o != nil {
			opts.observer = o
		}
	})
}

// WithLogger sets a logger for Redis failures (logged at Warn). A nil l
// is an error wrapping [limiter.ErrInvalidConfig]; to silence the limiter
// pass slog.New(slog.DiscardHandler). Default: [slog.Default].
func WithLogger(l *slog.Logger) Option {
	return optFunc(func(o *options) { o.logger, o.loggerSet = l, true })
}

// WithException gives one key its own limit instead of the limiter's (a
// hot item, a VIP user: Sentinel's hot-parameter exceptions), counted over
// the same period: for a [SlidingWindow], at most limit events in any
// window; for a [Bucket], a burst of limit refilled in the time the
// limiter's burst is (rate × limit / burst per second). Give it once per
// key; given twice for one key, the last wins. The default fallback of
// [limiter.FallbackLocal] applies the exception too. A limit out of the
// limiter's range (below 1; for a SlidingWindow above 1<<20; for a Bucket a
// rate or burst above 2^53-1) is an error wrapping
// [limiter.ErrInvalidConfig]. Default: no exception.
func WithException(key string, limit int) Option {
	return optFunc(func(o *options) {
		if o.exceptions == nil {
			o.exceptions = make(map[string]int)
		}
		o.exceptions[key] = limit
	})
}

// WithBatching sets how many pipelines the limiter keeps in flight before
// it coalesces further concurrent decisions into the next pipeline. A
// decision that finds a free slot is sent at once, so an idle limiter adds
// no latency; under load, decisions queued behind busy slots share one
// round trip, which cuts the system calls per decision on both sides. Each
// decision is still its own EVALSHA on its own key. n <= 0 disables
// batching (one round trip per call on the caller's goroutine). Batching
// needs a client with a Pipeline method (Client, ClusterClient, Ring);
// others run unbatched. Default 4.
//
// While batched, a caller whose ctx ends before its decision is taken into
// a pipeline returns ctx.Err(), and that decision is never sent: nothing is
// spent. Once taken, the decision completes within the client's read/write
// timeouts whatever the caller's ctx, and the caller gets its reply, never
// ctx.Err().
func WithBatching(n int) Option { return optFunc(func(o *options) { o.batch = n }) }
