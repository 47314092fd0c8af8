package order

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/seckillkit/seckill/internal/observe"
	"gorm.io/gorm"
)

// Clock supplies the current time; inject one with [WithClock] in tests.
type Clock interface{ Now() time.Time }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// Each constructor takes its own option type, so an option that does not
// apply to it does not compile:
//
//	constructor     option type        options
//	NewProcessor    ProcessorOption    WithClock, WithTables, WithPayTimeout, WithTxHook
//	NewConsumer     ConsumerOption     WithLogger, WithResults, WithBatchSize,
//	                                   WithMaxAttempts, WithBackoff, WithDeadLetter,
//	                                   WithNotifier, WithScheduler, WithHealthCheck,
//	                                   WithReleaseAttempts, WithOnError, WithObserver,
//	                                   WithContextFrom
//
// [WithTables] returns a [TableOption], an option of the processor and of
// the functions that take a database or a dialect ([AutoMigrate], [Schema], and those of
// order/operate and order/reconcile). A nil option is ignored; a nil collaborator — a constructor's required
// argument, or the value given to an option that needs one — fails with
// [ErrInvalidConfig].
type (
	// ProcessorOption configures [NewProcessor].
	ProcessorOption interface{ applyProcessor(*options) }
	// ConsumerOption configures [NewConsumer].
	ConsumerOption interface{ applyConsumer(*options) }
)

// The option types of one constructor, or of several (setOption).
type (
	processorOption func(*options)
	consumerOption  func(*options)
)

func (f processorOption) applyProcessor(o *options) { f(o) }
func (f consumerOption) applyConsumer(o *options)   { f(o) }

type options struct {
	clock       Clock
	logger      *slog.Logger
	payTimeout  time.Duration
	batchSize   int
	maxAttempts int
	backoffMin  time.Duration
	backoffMax  time.Duration
	deadLetter  DeadLetter
	results     ResultWriter
	notifier    Notifier
	scheduler   Scheduler
	health      func(context.Context) error
	onError     func(context.Context, error)
	releaseTry  int
	tables      Tables
	txHook      TxHook
	observer    observe.Observer                                                     // observe.go
	contextFrom func(ctx context.Context, headers map[string]string) context.Context // trace.go
	err         error                                                                // the first invalid option
}

func defaultOptions() options {
	return options{
		clock:       systemClock{},
		logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
		payTimeout:  30 * time.Minute,
		batchSize:   500,
		maxAttempts: 5,
		backoffMin:  50 * time.Millisecond,
		backoffMax:  5 * time.Second,
		releaseTry:  3,
		tables:      defaultTables(),
	}
}

// buildOptions applies the non-nil opts of one constructor to the
// defaults; the first invalid option's error is returned.
func buildOptions[T any](opts []T, apply func(T, *options)) (options, error) {
	o := defaultOptions()
	for _, opt := range opts {
		if any(opt) != nil {
			apply(opt, &o)
		}
	}
	return o, o.err
}

// fail records the first invalid option.
func (o *options) fail(format string, args ...any) {
	if o.err == nil {
		o.err = fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
	}
}

// WithClock sets the source of "now" of the [Processor] (expiry times,
// dedup rows) and of its [Consumer] (the results' times). Default: the
// system clock. A nil clock fails the constructor
// with [ErrInvalidConfig].
func WithClock(c Clock) ProcessorOption {
	return processorOption(func(o *options) {
		if c == nil {
			o.fail("nil clock")
			return
		}
		o.clock = c
	})
}

// WithLogger sets a logger for failures that are handled but worth seeing
// (a result write that failed, a message dead-lettered). Default:
// discard. A nil logger fails the constructor with [ErrInvalidConfig]
// (to silence a part, pass slog.New(slog.DiscardHandler)).
func WithLogger(l *slog.Logger) ConsumerOption {
	return consumerOption(func(o *options) {
		if l == nil {
			o.fail("nil logger")
			return
		}
		o.logger = l
	})
}

// WithResults makes the [Consumer] record SUCCESS/FAILED, after the
// commit, in r (status.Results). Default none; a
// nil r fails the constructor with [ErrInvalidConfig].
func WithResults(r ResultWriter) ConsumerOption {
	return consumerOption(func(o *options) {
		if r == nil {
			o.fail("nil results")
			return
		}
		o.results = r
	})
}

// WithPayTimeout sets how long a new order waits for payment before the
// status.Canceller cancels it ([Processor]). Default 30 minutes.
func WithPayTimeout(d time.Duration) ProcessorOption {
	return processorOption(func(o *options) { o.payTimeout = d })
}

// WithBatchSize sets the most messages the [Consumer] writes in one DB
// transaction (and so how many records a transport collects for one
// [Consumer.Consume]). 1 selects the one-transaction-per-message path.
// Default 500.
func WithBatchSize(n int) ConsumerOption {
	return consumerOption(func(o *options) { o.batchSize = n })
}

// WithMaxAttempts sets how many times the [Consumer] tries one message,
// while the database is healthy, before it is treated as poison and sent to
// the dead-letter sink. Attempts made while the health check fails (the DB
// is down) are not counted. Default 5.
func WithMaxAttempts(n int) ConsumerOption {
	return consumerOption(func(o *options) { o.maxAttempts = n })
}

// WithDeadLetter sets where the [Consumer] sends poison messages. Without
// one, a poison message stops [Consumer.Consume] with [ErrNoDeadLetter].
// Default none; a nil d fails [NewConsumer] with [ErrInvalidConfig].
func WithDeadLetter(d DeadLetter) ConsumerOption {
	return consumerOption(func(o *options) {
		if d == nil {
			o.fail("nil dead-letter sink")
			return
		}
		o.deadLetter = d
	})
}

// WithNotifier sets who the [Consumer] tells about each outcome after the DB
// commit (at least once). Default none; a nil n fails [NewConsumer] with
// [ErrInvalidConfig].
func WithNotifier(n Notifier) ConsumerOption {
	return consumerOption(func(o *options) {
		if n == nil {
			o.fail("nil notifier")
			return
		}
		o.notifier = n
	})
}

// WithScheduler makes the [Consumer] schedule each new order's unpaid
// cancellation (e.g. on a status.Canceller) after commit. The DB scan of the
// Canceller is the backstop when scheduling fails. Default none; a nil s
// fails [NewConsumer] with [ErrInvalidConfig].
func WithScheduler(s Scheduler) ConsumerOption {
	return consumerOption(func(o *options) {
		if s == nil {
			o.fail("nil scheduler")
			return
		}
		o.scheduler = s
	})
}

// WithHealthCheck sets how the [Consumer] tells "the database is down"
// (retry forever, do not count attempts) from "this message fails". Default:
// ping the *gorm.DB's sql.DB.
func WithHealthCheck(f func(context.Context) error) ConsumerOption {
	return consumerOption(func(o *options) { o.health = f })
}

// WithBackoff sets the exponential backoff between retries of the
// [Consumer] (doubling from min up to max, with jitter). Default 50 ms ..
// 5 s.
func WithBackoff(min, max time.Duration) ConsumerOption {
	return consumerOption(func(o *options) { o.backoffMin, o.backoffMax = min, max })
}

// WithOnError sets a hook for the [Consumer]'s failures handled in the
// background (a result not written, a release given up to the
// reconciler), called with the batch's context. Default none.
func WithOnError(f func(ctx context.Context, err error)) ConsumerOption {
	return consumerOption(func(o *options) { o.onError = f })
}

// WithReleaseAttempts sets how many times the [Consumer] tries to release a
// reservation of a failed order before leaving it to the reconcile.Reconciler.
// Default 3.
func WithReleaseAttempts(n int) ConsumerOption {
	return consumerOption(func(o *options) { o.releaseTry = n })
}

// TxHook is called by the [Processor] inside the transaction that writes
// orders, after their rows were inserted and before the activity's stock
// row is updated, with the transaction's NEW orders (never the duplicates
// of earlier deliveries): a batch's orders together, or one order on the
// one-by-one path. Write the shop's own rows through tx (tx carries ctx);
// they commit or roll back with the orders.
//
// An error rolls the whole transaction back, orders and dedup rows
// included, and fails it exactly like a database error: [Processor.Handle]
// and [Processor.Process] return it wrapped (errors.Is/As reach it), and
// the [Consumer] retries the batch one message at a time, so only the
// messages whose hook keeps failing are retried with backoff and, after
// [WithMaxAttempts] attempts while the database is healthy, sent to the
// dead-letter sink (no order, no dedup row: the reconcile.Reconciler releases
// their reservations after its grace period); their neighbours commit.
// Return [Permanent](err) to dead-letter a message at its first failure
// on the one-by-one path. The hook may run more than once for the same
// order — a batch that rolls back for any reason (a conflict, a sold-out
// activity, a commit that fails) is written again — so it must have no
// effect outside tx. On PostgreSQL a failed statement aborts tx: return
// its error. The hook is called without internal locks, but inside a
// transaction that holds row locks: keep it short.
type TxHook func(ctx context.Context, tx *gorm.DB, orders []Order) error

// WithTxHook sets the [Processor]'s [TxHook] (and so the [Consumer]'s):
// the shop's rows written in the same transaction as the orders. Default
// none; a nil h fails [NewProcessor] with [ErrInvalidConfig].
func WithTxHook(h TxHook) ProcessorOption {
	return processorOption(func(o *options) {
		if h == nil {
			o.fail("nil tx hook")
			return
		}
		o.txHook = h
	})
}

// TableOption names the tables: see [WithTables]. It is an option of
// [NewProcessor] (hence the [Consumer]'s tables), and the
// only option of the functions that take a database or a dialect
// ([AutoMigrate], [Schema], and those of order/operate and
// order/reconcile, which read it with [TablesOf]). A nil TableOption is
// ignored.
type TableOption interface {
	ProcessorOption
	applyTables(*Tables)
}

type tablesOption Tables

func (t tablesOption) applyTables(dst *Tables) {
	if t.Activity != "" {
		dst.Activity = t.Activity
	}
	if t.Order != "" {
		dst.Order = t.Order
	}
	if t.Dedup != "" {
		dst.Dedup = t.Dedup
	}
	if t.Adjust != "" {
		dst.Adjust = t.Adjust
	}
	if t.Payment != "" {
		dst.Payment = t.Payment
	}
	if t.Line != "" {
		dst.Line = t.Line
	}
}

func (t tablesOption) applyProcessor(o *options) { t.applyTables(&o.tables) }

// WithTables names the tables instead of the defaults, so that the order
// tables of several services (or a shop's own naming scheme) live side by
// side in one database. Empty fields keep their default names. Each name
// must be a plain lower-case SQL identifier — a letter or underscore, then
// letters, digits or underscores, at most [maxTableLen] bytes — and the
// names must differ; anything else makes the constructor or function fail
// with [ErrInvalidConfig]. Names are quoted in every statement, so a
// reserved word such as "order" is allowed. A table keeps the index names
// of schema.sql under its default name and gets names derived from its own
// otherwise (uk_<table>_order_no, idx_<table>_status_expire, …), so two
// configurations never collide. Every component that touches the tables,
// and [AutoMigrate], must be given the same names.
func WithTables(t Tables) TableOption { return tablesOption(t) }

// TablesOf returns the names opts give (the defaults for the fields none
// sets), or an error wrapping [ErrInvalidConfig] when a name is invalid or
// two are the same: how the packages built on order read a [TableOption].
func TablesOf(opts ...TableOption) (Tables, error) {
	t := defaultTables()
	for _, opt := range opts {
		if opt != nil {
			opt.applyTables(&t)
		}
	}
	return t, t.validate()
}
