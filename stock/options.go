package stock

import (
	"context"
	"log/slog"
	"time"

	"github.com/seckillkit/seckill/internal/observe"
)

// Clock supplies the current time. It drives the in-process sold-out cache
// and the [Preloader]; the activity window itself is always checked on Redis
// TIME inside the script.
type Clock interface{ Now() time.Time }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

const (
	defaultRecheckInterval = 500 * time.Millisecond
	defaultTransferGrace   = 2 * time.Second
	defaultTTL             = 24 * time.Hour // when Activity.TTL is zero
)

// DeductorOption configures a [Deductor] ([New]). The options that apply
// only to a Deductor return a DeductorOption, so passing one to
// [NewPreloader] does not compile; the options shared with the Preloader
// return an [Option]. A nil DeductorOption is ignored.
type DeductorOption interface{ applyDeductor(*options) }

// PreloaderOption configures a [Preloader] ([NewPreloader]). The options
// that apply only to a Preloader return a PreloaderOption, so passing one
// to [New] does not compile; the options shared with the Deductor return
// an [Option]. A nil PreloaderOption is ignored.
type PreloaderOption interface{ applyPreloader(*preloaderOptions) }

// Option is an option of both constructors: it is a [DeductorOption] and a
// [PreloaderOption]. Only [WithClock] and [WithLogger] return one.
type Option struct {
	deductor  func(*options)
	preloader func(*preloaderOptions)
}

func (o Option) applyDeductor(x *options) {
	if o.deductor != nil {
		o.deductor(x)
	}
}

func (o Option) applyPreloader(x *preloaderOptions) {
	if o.preloader != nil {
		o.preloader(x)
	}
}

// deductorOption is an option of New only.
type deductorOption func(*options)

func (f deductorOption) applyDeductor(o *options) { f(o) }

// preloaderOption is an option of NewPreloader only.
type preloaderOption func(*preloaderOptions)

func (f preloaderOption) applyPreloader(o *preloaderOptions) { f(o) }

type options struct {
	prefix     string
	clock      Clock
	logger     *slog.Logger
	recheck    time.Duration
	noCache    bool
	fallback   func(context.Context, Request) (Result, error)
	onReserve  func(context.Context, Request, Result, error)
	onRelease  func(context.Context, string, string, ReleaseResult, error)
	onSoldOut  func(ctx context.Context, activity string, soldOut bool)
	onLoss     func(ctx context.Context, activity, reason string)
	maxIDBytes int
	coalesce   bool
	coWindow   time.Duration
	coMax      int
	grace      time.Duration
	obs        observe.Observer
}

func defaultOptions() options {
	return options{
		prefix:     defaultKeyPrefix,
		clock:      systemClock{},
		logger:     slog.Default(),
		recheck:    defaultRecheckInterval,
		maxIDBytes: 128,
		grace:      defaultTransferGrace,
	}
}

// WithKeyPrefix sets the prefix of every key and of the pub/sub channel.
// Default "seckill:". Keys are
// "<prefix>{a:<activity>}:meta|buyers|resv|ever|adj".
func WithKeyPrefix(p string) DeductorOption { return deductorOption(func(o *options) { o.prefix = p }) }

// WithClock sets the clock. A Deductor uses it for the in-process sold-out
// cache (when the flag expires without [Deductor.Run]) and for Run's
// re-check; a Preloader for its lead-time window. Default: the system
// clock for a Deductor, the Deductor's clock for a Preloader. The activity
// window never uses it: it is checked on Redis TIME. A nil c is an
// [ErrInvalidConfig] error.
func WithClock(c Clock) Option {
	return Option{
		deductor:  func(o *options) { o.clock = c },
		preloader: func(o *preloaderOptions) { o.clock = c },
	}
}

// WithLogger sets a logger for failures and sold-out transitions (a
// Deductor) or for its passes (a Preloader). Default: [slog.Default] for
// a Deductor, the Deductor's logger for a Preloader. A nil l is an [ErrInvalidConfig] error; to silence a part,
// pass slog.New(slog.DiscardHandler).
func WithLogger(l *slog.Logger) Option {
	return Option{
		deductor:  func(o *options) { o.logger = l },
		preloader: func(o *preloaderOptions) { o.logger = l },
	}
}

// WithRecheckInterval sets how long an in-process sold-out flag is trusted
// before it is checked again, the backstop for a missed release message:
// under [Deductor.Run] by one Stats call (the flag stays while Redis
// confirms it), without Run by letting one Reserve through to Redis.
// Default 500ms. Must be > 0.
func WithRecheckInterval(d time.Duration) DeductorOption {
	return deductorOption(func(o *options) { o.recheck = d })
}

// WithoutSoldOutCache disables the in-process sold-out short-circuit: every
// Reserve goes to Redis. Default: the cache is on.
func WithoutSoldOutCache() DeductorOption {
	return deductorOption(func(o *options) { o.noCache = true })
}

// WithFallback sets f, a fallback that reserves stock some other way
// (typically the database, with a row lock or a conditional UPDATE, as
// stock/dbfallback's Store.Reserve does) when Redis is unavailable.
// Default: none; Reserve fails fast with the [ErrUnavailable] error, which
// lets the service answer "too busy" in microseconds.
//
// Reserve calls f with the original request only after the Redis call
// failed with ErrUnavailable. f's Result is returned with Result.Fallback
// set (its error is joined with the Redis error). The Redis ledger knows
// nothing of fallback reservations: Release of such a reservation ID
// writes a harmless tombstone, and the fallback's owner must give its units
// back itself. Because the Redis script may have run before a timeout, f
// must be idempotent by ReservationID too, and the reconciler should
// compare both stores after an outage.
func WithFallback(f func(ctx context.Context, req Request) (Result, error)) DeductorOption {
	return deductorOption(func(o *options) { o.fallback = f })
}

// WithOnReserve sets a hook called after every Reserve, with its outcome
// (including in-process refusals and errors). It runs on the caller's
// goroutine, outside any lock; keep it fast. Default: none.
func WithOnReserve(f func(ctx context.Context, req Request, res Result, err error)) DeductorOption {
	return deductorOption(func(o *options) { o.onReserve = f })
}

// WithOnRelease sets a hook called after every Release with its outcome.
// It runs on the caller's goroutine, outside any lock. Default: none.
func WithOnRelease(f func(ctx context.Context, activity, reservationID string, res ReleaseResult, err error)) DeductorOption {
	return deductorOption(func(o *options) { o.onRelease = f })
}

// WithOnSoldOut sets a hook called when this process's sold-out flag of an
// activity is set (soldOut true) or cleared (false). ctx is the context of
// the call that changed the flag (a Reserve, Release, Adjust, Load, …, or
// [Deductor.Run] for a release message or a re-check);
// context.Background() when the flag was found expired by
// [Deductor.SoldOutFor] or [Deductor.SoldOutForPrefix], which take no
// context. It runs outside any lock. Default: none.
func WithOnSoldOut(f func(ctx context.Context, activity string, soldOut bool)) DeductorOption {
	return deductorOption(func(o *options) { o.onSoldOut = f })
}

// WithOnLoss sets a hook called when a Reserve or Release reveals that
// Redis lost or rolled back the activity's data (see "Redis data loss" in
// the package doc), once per detection, after the Deductor has tried to
// freeze the activity. reason says what was seen. It runs on the caller's
// goroutine with its ctx, outside any lock. Page someone, or start the
// recovery ([Preloader] with [WithRecovery] does it by itself). Default:
// none (the loss is logged at error level).
func WithOnLoss(f func(ctx context.Context, activity, reason string)) DeductorOption {
	return deductorOption(func(o *options) { o.onLoss = f })
}

// WithMaxReservationIDBytes lowers the longest reservation ID Reserve accepts,
// in 1..[MaxReservationIDLen] bytes (NewDeductor refuses more: a longer ID
// could never become an order). Default and maximum 128. Release and
// Lookup accept any ID of up to MaxReservationIDLen bytes whatever the
// setting.
func WithMaxReservationIDBytes(n int) DeductorOption {
	return deductorOption(func(o *options) { o.maxIDBytes = n })
}

// WithCoalescing gathers concurrent Reserve calls of one activity made
// through this Deductor into batches decided by one Redis script call each
// (reserve_many.lua): a batch is sent when it holds maxBatch requests or
// window after its first request arrived, whichever comes first. Each
// request is decided exactly as a single Reserve would decide it (reservation-ID
// replay, frozen, window on Redis TIME, stock, per-user cap, ledger entry,
// the data-loss fence), in the order the requests joined the batch; the
// same reservation ID twice in one batch is decided once and replayed to the
// second. A batch never mixes activities, nor the shards of a sharded
// activity, so it touches one Cluster slot.
//
// Use it when one hot activity's Reserve traffic approaches what one Redis
// core can run (see "Coalescing" in the package doc): a batch costs Redis
// far less CPU per reservation than one script call per request and needs
// one round trip instead of many, so throughput rises several-fold, at the
// price of up to window of added latency per call (a lone request waits the
// whole window). Without that load it only adds latency: leave it off.
//
// Keep maxBatch below the number of concurrent callers per process (a
// batch that never fills always waits the whole window) and the window near
// one or two Redis round trips. A caller whose context ends before its batch
// is sent gets the context's error and its request is never sent; once
// sent, it waits for its real outcome. Zero means the default: window
// 500µs, maxBatch 64. New refuses a negative window and a maxBatch outside
// [0, 1024]. Default: off (one script call per Reserve).
func WithCoalescing(window time.Duration, maxBatch int) DeductorOption {
	return deductorOption(func(o *options) { o.coalesce, o.coWindow, o.coMax = true, window, maxBatch })
}

// WithTransferGrace sets how long a transfer of units between two shards of
// a sharded activity may stay unfinished (its donor's step done, its
// recipient's not, or its record not yet settled) before a Reserve that
// needs to borrow, or a [Preloader] pass, finishes it by itself: applied
// if the recipient applied it, refunded to the donor otherwise (see
// "Sharding" in the package doc). A transfer takes a few milliseconds; one
// older than this was most likely cut short by a crash or a timeout.
// Finishing one still in progress is safe (the recipient decides once) but
// makes it fail. Measured on Redis TIME. Default 2s; must be >= 0. [Deductor.SettleTransfers]
// finishes every unfinished transfer whatever its age.
func WithTransferGrace(d time.Duration) DeductorOption {
	return deductorOption(func(o *options) { o.grace = d })
}
