package stock

import (
	"context"
	"io"
	"log/slog"
	"time"

	"github.com/seckillkit/seckill/observe"
)

// Clock supplies the current time. It drives the in-process sold-out cache
// and the [Preloader]; the activity window itself is always checked on Redis
// TIME inside the script.
type Clock interface{ Now() time.Time }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// DefaultRecheckInterval is the default of [WithRecheckInterval].
const DefaultRecheckInterval = 500 * time.Millisecond

// DefaultTransferGrace is the default of [WithTransferGrace].
const DefaultTransferGrace = 2 * time.Second

// DefaultTTL is used when [Activity.TTL] is zero.
const DefaultTTL = 24 * time.Hour

// Option configures a [Deductor].
type Option func(*options)

type options struct {
	prefix     string
	clock      Clock
	logger     *slog.Logger
	recheck    time.Duration
	noCache    bool
	fallback   Fallback
	onReserve  func(context.Context, Request, Result, error)
	onRelease  func(context.Context, string, string, ReleaseResult, error)
	onSoldOut  func(activity string, soldOut bool)
	onLoss     func(activity, reason string)
	maxIDBytes int
	coalesce   bool
	coWindow   time.Duration
	coMax      int
	grace      time.Duration
	obs        observe.Observer
}

func defaultOptions() options {
	return options{
		prefix:     DefaultKeyPrefix,
		clock:      systemClock{},
		logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
		recheck:    DefaultRecheckInterval,
		maxIDBytes: 128,
		grace:      DefaultTransferGrace,
	}
}

// WithKeyPrefix sets the prefix of every key and of the pub/sub channel.
// Default "seckill:" ([DefaultKeyPrefix]). Keys are
// "<prefix>{a:<activity>}:meta|buyers|resv|ever|adj".
func WithKeyPrefix(p string) Option { return func(o *options) { o.prefix = p } }

// WithClock sets the clock used by the in-process sold-out cache (when the
// flag expires without [Deductor.Run]) and by Run's re-check. Default: the
// system clock. The activity window never uses it: it is checked on Redis TIME.
func WithClock(c Clock) Option { return func(o *options) { o.clock = c } }

// WithLogger sets a logger for failures and sold-out transitions. Default: a
// logger that discards everything.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithRecheckInterval sets how long an in-process sold-out flag is trusted
// before it is checked again, the backstop for a missed release message:
// under [Deductor.Run] by one Stats call (the flag stays while Redis
// confirms it), without Run by letting one Reserve through to Redis.
// Default 500ms ([DefaultRecheckInterval]). Must be > 0.
func WithRecheckInterval(d time.Duration) Option { return func(o *options) { o.recheck = d } }

// WithoutSoldOutCache disables the in-process sold-out short-circuit: every
// Reserve goes to Redis. Default: the cache is on.
func WithoutSoldOutCache() Option { return func(o *options) { o.noCache = true } }

// WithFallback sets a [Fallback] called by Reserve when Redis is unavailable
// (an error matching [ErrUnavailable]). Default: none; Reserve fails fast
// with the ErrUnavailable error.
func WithFallback(f Fallback) Option { return func(o *options) { o.fallback = f } }

// WithOnReserve sets a hook called after every Reserve, with its outcome
// (including in-process refusals and errors). It runs on the caller's
// goroutine, outside any lock; keep it fast. Default: none.
func WithOnReserve(f func(ctx context.Context, req Request, res Result, err error)) Option {
	return func(o *options) { o.onReserve = f }
}

// WithOnRelease sets a hook called after every Release with its outcome.
// It runs on the caller's goroutine, outside any lock. Default: none.
func WithOnRelease(f func(ctx context.Context, activity, reservationID string, res ReleaseResult, err error)) Option {
	return func(o *options) { o.onRelease = f }
}

// WithOnSoldOut sets a hook called when this process's sold-out flag of an
// activity is set (soldOut true) or cleared (false). It runs outside any
// lock. Default: none.
func WithOnSoldOut(f func(activity string, soldOut bool)) Option {
	return func(o *options) { o.onSoldOut = f }
}

// WithOnLoss sets a hook called when a Reserve or Release reveals that
// Redis lost or rolled back the activity's data (see "Redis data loss" in
// the package doc), once per detection, after the Deductor has tried to
// freeze the activity. reason says what was seen. It runs on the caller's
// goroutine, outside any lock. Page someone, or start the recovery
// ([Preloader] with [WithRecovery] does it by itself). Default: none (the
// loss is logged at error level).
func WithOnLoss(f func(activity, reason string)) Option {
	return func(o *options) { o.onLoss = f }
}

// WithMaxReservationIDBytes lowers the longest reservation ID Reserve accepts,
// in 1..[MaxReservationIDLen] bytes (NewDeductor refuses more: a longer ID
// could never become an order). Default and maximum 128. Release and
// Lookup accept any ID of up to MaxReservationIDLen bytes whatever the
// setting.
func WithMaxReservationIDBytes(n int) Option { return func(o *options) { o.maxIDBytes = n } }

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
// sent, it waits for its real outcome. Zero means the default: window 500µs
// ([DefaultCoalesceWindow]), maxBatch 64 ([DefaultCoalesceMaxBatch]). New
// refuses a negative window and a maxBatch outside [0, 1024]
// ([MaxCoalesceBatch]). Default: off (one script call per Reserve).
func WithCoalescing(window time.Duration, maxBatch int) Option {
	return func(o *options) { o.coalesce, o.coWindow, o.coMax = true, window, maxBatch }
}

// WithTransferGrace sets how long a transfer of units between two shards of
// a sharded activity may stay unfinished (its donor's step done, its
// recipient's not, or its record not yet settled) before a Reserve that
// needs to borrow, or a [Preloader] pass, finishes it by itself: applied
// if the recipient applied it, refunded to the donor otherwise (see
// "Sharding" in the package doc). A transfer takes a few milliseconds; one
// older than this was most likely cut short by a crash or a timeout.
// Finishing one still in progress is safe (the recipient decides once) but
// makes it fail. Measured on Redis TIME. Default 2s
// ([DefaultTransferGrace]); must be >= 0. [Deductor.SettleTransfers]
// finishes every unfinished transfer whatever its age.
func WithTransferGrace(d time.Duration) Option { return func(o *options) { o.grace = d } }
