package status

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/seckillkit/seckill/internal/observe"
	"github.com/seckillkit/seckill/order"
)

// Each constructor takes its own option type, so an option that does not
// apply to it does not compile:
//
//	constructor     option type        options
//	NewResults      ResultsOption      WithClock, WithLogger, WithKeyPrefix, WithTables,
//	                                   WithResultTTL
//	NewCanceller    CancellerOption    WithClock, WithLogger, WithKeyPrefix, WithTables,
//	                                   WithBackoff, WithOnError, WithObserver,
//	                                   WithPollInterval, WithScanInterval, WithScanBatch,
//	                                   WithOnPayCancelled, WithOnPayConflict,
//	                                   WithRefundHook
//	NewOrders       TableOption        WithTables
//
// [WithClock], [WithLogger] and [WithKeyPrefix] return an [Option], both
// a ResultsOption and a CancellerOption; [WithTables] a [order.TableOption], an
// option of all three. A nil option is ignored; a nil collaborator fails
// the constructor with order.ErrInvalidConfig.
type (
	// ResultsOption configures [NewResults].
	ResultsOption interface{ applyResults(*options) }
	// CancellerOption configures [NewCanceller].
	CancellerOption interface{ applyCanceller(*options) }
	// Option is an option of [NewResults] and [NewCanceller].
	Option interface {
		ResultsOption
		CancellerOption
	}
	// TableOption is an option of every constructor ([WithTables]), the
	// only option of [NewOrders].
	TableOption interface {
		Option
		applyOrders(*options)
	}
)

type (
	resultsOption   func(*options)
	cancellerOption func(*options)
	setOption       func(*options)
)

func (f resultsOption) applyResults(o *options)     { f(o) }
func (f cancellerOption) applyCanceller(o *options) { f(o) }
func (f setOption) applyResults(o *options)         { f(o) }
func (f setOption) applyCanceller(o *options)       { f(o) }
func (f setOption) applyOrders(o *options)          { f(o) }

type options struct {
	clock         order.Clock
	logger        *slog.Logger
	prefix        string
	tables        order.Tables
	resultTTL     time.Duration
	backoffMin    time.Duration
	backoffMax    time.Duration
	onError       func(context.Context, error)
	observer      observe.Observer
	poll          time.Duration
	scan          time.Duration
	scanBatch     int
	onPayCancel   func(context.Context, order.Order)
	onPayConflict func(context.Context, order.Order, Payment)
	refundHook    order.TxHook
	err           error // the first invalid option
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// buildOptions applies the non-nil opts of one constructor to the
// defaults and resolves the table names; the first invalid option's error
// is returned.
func buildOptions[T any](opts []T, apply func(T, *options)) (options, error) {
	o := options{
		clock:      systemClock{},
		logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
		prefix:     "seckill:",
		resultTTL:  24 * time.Hour,
		backoffMin: 50 * time.Millisecond,
		backoffMax: 5 * time.Second,
		poll:       time.Second,
		scan:       time.Minute,
		scanBatch:  200,
	}
	for _, opt := range opts {
		if any(opt) != nil {
			apply(opt, &o)
		}
	}
	if o.err != nil {
		return o, o.err
	}
	t, err := order.TablesOf(order.WithTables(o.tables))
	o.tables = t
	return o, err
}

func (o *options) fail(format string, args ...any) {
	if o.err == nil {
		o.err = fmt.Errorf("%w: "+format, append([]any{order.ErrInvalidConfig}, args...)...)
	}
}

// WithClock sets the source of "now" for results and the cancellation
// queue. Default: the system clock; a nil c fails the constructor with
// order.ErrInvalidConfig.
func WithClock(c order.Clock) Option {
	return setOption(func(o *options) {
		if c == nil {
			o.fail("nil clock")
			return
		}
		o.clock = c
	})
}

// WithLogger sets a logger for failures that are handled but worth seeing
// (a Redis read that fell back to the DB, a cancellation retried).
// Default: discard; a nil l fails the constructor with
// order.ErrInvalidConfig (to silence it, pass slog.New(slog.DiscardHandler)).
func WithLogger(l *slog.Logger) Option {
	return setOption(func(o *options) {
		if l == nil {
			o.fail("nil logger")
			return
		}
		o.logger = l
	})
}

// WithKeyPrefix sets the Redis key prefix of [Results] and [Canceller].
// Default "seckill:".
func WithKeyPrefix(p string) Option {
	return setOption(func(o *options) { o.prefix = p })
}

// WithTables names the order tables (see order.WithTables): every part
// must be given the names the consumer writes. Default: the default names.
func WithTables(t order.Tables) TableOption {
	return setOption(func(o *options) { o.tables = t })
}

// WithResultTTL sets how long [Results] keeps a status in Redis. Default 24 h.
func WithResultTTL(d time.Duration) ResultsOption {
	return resultsOption(func(o *options) { o.resultTTL = d })
}

// WithBackoff sets the exponential backoff of the [Canceller]'s retries
// (doubling from min up to max, with jitter). Default 50 ms .. 5 s.
func WithBackoff(min, max time.Duration) CancellerOption {
	return cancellerOption(func(o *options) { o.backoffMin, o.backoffMax = min, max })
}

// WithOnError sets a hook for the [Canceller]'s failures handled in the
// background (a cancellation to be retried), called with the Run
// context. Default none.
func WithOnError(f func(ctx context.Context, err error)) CancellerOption {
	return cancellerOption(func(o *options) { o.onError = f })
}

// WithOnPayCancelled sets the refund hook: [Canceller.Pay] calls it (outside
// any lock or transaction) when a payment arrives for a cancelled order.
// Default none.
func WithOnPayCancelled(f func(ctx context.Context, o order.Order)) CancellerOption {
	return cancellerOption(func(o *options) { o.onPayCancel = f })
}

// WithOnPayConflict sets the conflict hook: [Canceller.PayRef] calls it
// (after the commit, outside any transaction) with the order and the
// payment when a second, different payment arrives for a paid (or
// refunded) order; the shop refunds that payment. At least once: a
// repeat of the same payment calls it again. Default none.
func WithOnPayConflict(f func(ctx context.Context, o order.Order, p Payment)) CancellerOption {
	return cancellerOption(func(o *options) { o.onPayConflict = f })
}

// WithRefundHook sets the refund hook, an [order.TxHook] (the shape of the
// consumer's): [Canceller.Refund] with [RestockShop] calls it inside the
// refund's transaction, after the CAS to REFUNDED, with the refunded order,
// so the shop's own inventory rows commit or roll back with the refund —
// exactly once per refund. An error rolls the refund back and is returned.
// Default none (RestockShop is then refused); a nil h fails the constructor.
func WithRefundHook(h order.TxHook) CancellerOption {
	return cancellerOption(func(o *options) {
		if h == nil {
			o.fail("nil refund hook")
			return
		}
		o.refundHook = h
	})
}

// WithPollInterval sets how often [Canceller.Run] polls the delay queue.
// Default 1 s.
func WithPollInterval(d time.Duration) CancellerOption {
	return cancellerOption(func(o *options) { o.poll = d })
}

// WithScanInterval sets how often [Canceller.Run] scans the DB for expired
// CREATED orders (the backstop of the delay queue). Default 1 minute.
func WithScanInterval(d time.Duration) CancellerOption {
	return cancellerOption(func(o *options) { o.scan = d })
}

// WithScanBatch sets how many orders one scan or poll cancels at most.
// Default 200.
func WithScanBatch(n int) CancellerOption {
	return cancellerOption(func(o *options) { o.scanBatch = n })
}

// ReasonCancelled is the Reason of the FAILED result of a cancelled order
// (unpaid at expiry, or by request); the result keeps its OrderNo.
const ReasonCancelled = "cancelled"

// StageCancel is the stage [WithObserver] reports, for every cancellation
// attempt of the [Canceller] (Cancel, the delay queue, the DB scan, Pay on
// an expired order), with the outcome ok | already_cancelled |
// already_paid | not_found | not_due | release_pending | error and the
// attempt's Duration.
const StageCancel = "order.cancel"

// StageRefund is the stage [WithObserver] reports for every
// [Canceller.Refund], with the outcome ok | already_refunded | not_paid |
// already_cancelled | not_found | error.
const StageRefund = "order.refund"

// WithObserver reports the [Canceller]'s cancellations to o
// ([StageCancel]), synchronously, after each. Default none; a nil o is
// ignored.
func WithObserver(o observe.Observer) CancellerOption {
	return cancellerOption(func(opts *options) {
		if o != nil {
			opts.observer = o
		}
	})
}
