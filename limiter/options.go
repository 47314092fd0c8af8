package limiter

import (
	"log/slog"
)

// Option configures a limiter constructor. Each option says which
// constructors read it; the others ignore it.
type Option func(*options)

type options struct {
	clock     Clock
	prefix    string
	name      string
	policy    FailurePolicy
	fallback  Limiter
	onFailure func(key string, err error)
	observer  Observer
	logger    *slog.Logger
	maxKeys   int
	shards    int
	batch     int
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

func buildOptions(opts []Option) options {
	o := defaultOptions()
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if o.logger == nil {
		o.logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// WithClock sets the clock of the in-process limiters ([TokenBucket],
// [Keyed]). Default: the runtime's monotonic clock (see [CoarseClock] for a
// faster one). The Redis limiters ignore it: their "now" is Redis TIME.
func WithClock(c Clock) Option { return func(o *options) { o.clock = c } }

// WithKeyPrefix sets the prefix of every Redis key ([SlidingWindow],
// [RedisBucket]). Default "seckill:".
func WithKeyPrefix(p string) Option { return func(o *options) { o.prefix = p } }

// WithName names the limiter; the name is part of its Redis keys so that
// two limiters sharing a prefix never share state ([SlidingWindow],
// [RedisBucket]). Default "default".
func WithName(n string) Option { return func(o *options) { o.name = n } }

// WithFailurePolicy chooses what a Redis limiter answers when Redis fails
// ([SlidingWindow], [RedisBucket]). Default [FailClosed].
func WithFailurePolicy(p FailurePolicy) Option { return func(o *options) { o.policy = p } }

// WithFallback sets the limiter consulted under [FallbackLocal]. Default: a
// [Keyed] token bucket per key with the same limit and period as the Redis
// limiter — per process, so with N instances the cluster admits up to N
// times the limit while Redis is down.
func WithFallback(l Limiter) Option { return func(o *options) { o.fallback = l } }

// WithOnFailure sets a hook called once for every Redis failure, whatever
// the policy, with the key and the error (which wraps [ErrUnavailable]). It
// is called synchronously, outside any lock. Default: none.
func WithOnFailure(f func(key string, err error)) Option {
	return func(o *options) { o.onFailure = f }
}

// WithObserver reports every decision of a Redis limiter ([SlidingWindow],
// [RedisBucket]) to o as the stage "limiter.allow", synchronously, with the
// caller's ctx and Name set to [WithName] (see [StageAllow] for the
// outcomes). A nil o is ignored. Without an observer nothing is measured.
// Default: none.
func WithObserver(o Observer) Option {
	return func(opts *options) {
		if o != nil {
			opts.observer = o
		}
	}
}

// WithLogger sets a logger for failures (logged at Warn). Default: discard.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithMaxKeys caps the number of keys a [Keyed] limiter holds. Default
// 1<<20 (about 64 MiB at worst). See [Keyed] for what happens at the cap.
func WithMaxKeys(n int) Option { return func(o *options) { o.maxKeys = n } }

// WithShards sets the number of lock shards of a [Keyed] limiter (rounded
// up to a power of two). Default 64.
func WithShards(n int) Option { return func(o *options) { o.shards = n } }

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
func WithBatching(n int) Option { return func(o *options) { o.batch = n } }
