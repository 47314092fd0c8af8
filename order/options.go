package order

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/seckillkit/seckill/observe"
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
//	NewProcessor    ProcessorOption    WithClock, WithPayTimeout, WithTables, WithTxHook
//	NewConsumer     ConsumerOption     WithClock, WithLogger, WithBatchSize, WithMaxAttempts,
//	                                   WithBackoff, WithDeadLetter, WithResults, WithNotifier,
//	                                   WithScheduler, WithHealthCheck, WithReleaseAttempts,
//	                                   WithOnError, WithObserver, WithContextFrom
//	NewSubmitter    SubmitterOption    WithClock, WithLogger, WithResults, WithObserver
//	NewFence        FenceOption        WithClock, WithLogger, WithResults, WithTables
//	NewResults      ResultsOption      WithClock, WithLogger, WithKeyPrefix, WithResultTTL,
//	                                   WithTables
//	NewCanceller    CancellerOption    WithClock, WithLogger, WithKeyPrefix, WithBackoff,
//	                                   WithOnError, WithObserver, WithTables, WithPollInterval,
//	                                   WithScanInterval, WithScanBatch, WithOnPayCancelled
//	NewReconciler   ReconcilerOption   WithClock, WithLogger, WithResults, WithObserver,
//	                                   WithTables, WithGrace, WithDryRun, WithPending
//	NewOrders       OrdersOption       WithTables, WithCanceller
//
// The options of several constructors return a type that implements each
// of their interfaces: [ClockOption], [LoggerOption], [KeyPrefixOption],
// [BackoffOption], [ResultsWriterOption], [OnErrorOption],
// [ObserverOption] and [TableOption] (which is also the only option of the
// functions that take a database or a dialect: [AutoMigrate], [Schema],
// …). A nil option is ignored; a nil collaborator — a constructor's
// required argument, or the value given to an option that needs one — is
// an error ([ErrInvalidConfig]) or, where documented, keeps the default.
type (
	// ProcessorOption configures [NewProcessor].
	ProcessorOption interface{ applyProcessor(*options) }
	// ConsumerOption configures [NewConsumer].
	ConsumerOption interface{ applyConsumer(*options) }
	// SubmitterOption configures [NewSubmitter].
	SubmitterOption interface{ applySubmitter(*options) }
	// FenceOption configures [NewFence].
	FenceOption interface{ applyFence(*options) }
	// ResultsOption configures [NewResults].
	ResultsOption interface{ applyResults(*options) }
	// CancellerOption configures [NewCanceller].
	CancellerOption interface{ applyCanceller(*options) }
	// ReconcilerOption configures [NewReconciler].
	ReconcilerOption interface{ applyReconciler(*options) }
	// OrdersOption configures [NewOrders].
	OrdersOption interface{ applyOrders(*options) }
)

// The option types of one constructor only.
type (
	processorOpt  func(*options)
	consumerOpt   func(*options)
	resultsOpt    func(*options)
	cancellerOpt  func(*options)
	reconcilerOpt func(*options)
	ordersOpt     func(*options)
)

func (f processorOpt) applyProcessor(o *options)   { f(o) }
func (f consumerOpt) applyConsumer(o *options)     { f(o) }
func (f resultsOpt) applyResults(o *options)       { f(o) }
func (f cancellerOpt) applyCanceller(o *options)   { f(o) }
func (f reconcilerOpt) applyReconciler(o *options) { f(o) }
func (f ordersOpt) applyOrders(o *options)         { f(o) }

// ClockOption is returned by [WithClock]: a [ProcessorOption],
// [ConsumerOption], [SubmitterOption], [FenceOption], [ResultsOption],
// [CancellerOption] and [ReconcilerOption].
type ClockOption func(*options)

func (f ClockOption) apply(o *options) {
	if f != nil {
		f(o)
	}
}

func (f ClockOption) applyProcessor(o *options)  { f.apply(o) }
func (f ClockOption) applyConsumer(o *options)   { f.apply(o) }
func (f ClockOption) applySubmitter(o *options)  { f.apply(o) }
func (f ClockOption) applyFence(o *options)      { f.apply(o) }
func (f ClockOption) applyResults(o *options)    { f.apply(o) }
func (f ClockOption) applyCanceller(o *options)  { f.apply(o) }
func (f ClockOption) applyReconciler(o *options) { f.apply(o) }

// LoggerOption is returned by [WithLogger]: a [ConsumerOption],
// [SubmitterOption], [FenceOption], [ResultsOption], [CancellerOption] and
// [ReconcilerOption] (the types that log).
type LoggerOption func(*options)

func (f LoggerOption) apply(o *options) {
	if f != nil {
		f(o)
	}
}

func (f LoggerOption) applyConsumer(o *options)   { f.apply(o) }
func (f LoggerOption) applySubmitter(o *options)  { f.apply(o) }
func (f LoggerOption) applyFence(o *options)      { f.apply(o) }
func (f LoggerOption) applyResults(o *options)    { f.apply(o) }
func (f LoggerOption) applyCanceller(o *options)  { f.apply(o) }
func (f LoggerOption) applyReconciler(o *options) { f.apply(o) }

// KeyPrefixOption is returned by [WithKeyPrefix]: a [ResultsOption] and a
// [CancellerOption] (the types with Redis keys).
type KeyPrefixOption func(*options)

func (f KeyPrefixOption) apply(o *options) {
	if f != nil {
		f(o)
	}
}

func (f KeyPrefixOption) applyResults(o *options)   { f.apply(o) }
func (f KeyPrefixOption) applyCanceller(o *options) { f.apply(o) }

// BackoffOption is returned by [WithBackoff]: a [ConsumerOption] and a
// [CancellerOption].
type BackoffOption func(*options)

func (f BackoffOption) apply(o *options) {
	if f != nil {
		f(o)
	}
}

func (f BackoffOption) applyConsumer(o *options)  { f.apply(o) }
func (f BackoffOption) applyCanceller(o *options) { f.apply(o) }

// ResultsWriterOption is returned by [WithResults]: a [ConsumerOption],
// [SubmitterOption], [FenceOption] and [ReconcilerOption] (the types that
// record results).
type ResultsWriterOption func(*options)

func (f ResultsWriterOption) apply(o *options) {
	if f != nil {
		f(o)
	}
}

func (f ResultsWriterOption) applyConsumer(o *options)   { f.apply(o) }
func (f ResultsWriterOption) applySubmitter(o *options)  { f.apply(o) }
func (f ResultsWriterOption) applyFence(o *options)      { f.apply(o) }
func (f ResultsWriterOption) applyReconciler(o *options) { f.apply(o) }

// OnErrorOption is returned by [WithOnError]: a [ConsumerOption] and a
// [CancellerOption] (the types with background failures).
type OnErrorOption func(*options)

func (f OnErrorOption) apply(o *options) {
	if f != nil {
		f(o)
	}
}

func (f OnErrorOption) applyConsumer(o *options)  { f.apply(o) }
func (f OnErrorOption) applyCanceller(o *options) { f.apply(o) }

// ObserverOption is returned by [WithObserver]: a [ConsumerOption],
// [SubmitterOption], [CancellerOption] and [ReconcilerOption].
type ObserverOption func(*options)

func (f ObserverOption) apply(o *options) {
	if f != nil {
		f(o)
	}
}

func (f ObserverOption) applyConsumer(o *options)   { f.apply(o) }
func (f ObserverOption) applySubmitter(o *options)  { f.apply(o) }
func (f ObserverOption) applyCanceller(o *options)  { f.apply(o) }
func (f ObserverOption) applyReconciler(o *options) { f.apply(o) }

type options struct {
	clock       Clock
	logger      *slog.Logger
	prefix      string
	payTimeout  time.Duration
	batchSize   int
	maxAttempts int
	backoffMin  time.Duration
	backoffMax  time.Duration
	deadLetter  DeadLetter
	results     *Results
	notifier    Notifier
	scheduler   Scheduler
	health      func(context.Context) error
	resultTTL   time.Duration
	onPayCancel func(context.Context, Order)
	onError     func(context.Context, error)
	poll        time.Duration
	scan        time.Duration
	scanBatch   int
	grace       time.Duration
	dryRun      bool
	pending     Pending
	releaseTry  int
	tables      Tables
	txHook      TxHook
	canceller   *Canceller                                                           // orders.go
	observer    observe.Observer                                                     // observe.go
	headers     func(ctx context.Context) map[string]string                          // trace.go
	contextFrom func(ctx context.Context, headers map[string]string) context.Context // trace.go
	err         error                                                                // the first invalid option
}

func defaultOptions() options {
	return options{
		clock:       systemClock{},
		logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
		prefix:      "seckill:",
		payTimeout:  30 * time.Minute,
		batchSize:   500,
		maxAttempts: 5,
		backoffMin:  50 * time.Millisecond,
		backoffMax:  5 * time.Second,
		resultTTL:   24 * time.Hour,
		poll:        time.Second,
		scan:        time.Minute,
		scanBatch:   200,
		grace:       10 * time.Minute,
		releaseTry:  3,
		tables:      DefaultTables(),
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

// WithClock sets the source of "now" for expiry times, results, the
// cancellation queue and the reconciler's grace period.
// Default: the system clock. A nil clock fails the constructor with
// [ErrInvalidConfig].
func WithClock(c Clock) ClockOption {
	return ClockOption(func(o *options) {
		if c == nil {
			o.fail("nil clock")
			return
		}
		o.clock = c
	})
}

// WithLogger sets a logger for failures that are handled but worth seeing
// (a result write that failed, a release retried). Default: discard. A
// nil logger fails the constructor with [ErrInvalidConfig] (to silence a
// part, pass slog.New(slog.DiscardHandler)).
func WithLogger(l *slog.Logger) LoggerOption {
	return LoggerOption(func(o *options) {
		if l == nil {
			o.fail("nil logger")
			return
		}
		o.logger = l
	})
}

// WithKeyPrefix sets the Redis key prefix of [Results] and [Canceller].
// Default "seckill:".
func WithKeyPrefix(p string) KeyPrefixOption {
	return KeyPrefixOption(func(o *options) { o.prefix = p })
}

// WithPayTimeout sets how long a new order waits for payment before the
// [Canceller] cancels it ([Processor]). Default 30 minutes.
func WithPayTimeout(d time.Duration) ProcessorOption {
	return processorOpt(func(o *options) { o.payTimeout = d })
}

// WithBatchSize sets the most messages the [Consumer] writes in one DB
// transaction (and so how many records a transport collects for one
// [Consumer.Consume]). 1 selects the one-transaction-per-message path.
// Default 500.
func WithBatchSize(n int) ConsumerOption {
	return consumerOpt(func(o *options) { o.batchSize = n })
}

// WithMaxAttempts sets how many times the [Consumer] tries one message,
// while the database is healthy, before it is treated as poison and sent to
// the dead-letter sink. Attempts made while the health check fails (the DB
// is down) are not counted. Default 5.
func WithMaxAttempts(n int) ConsumerOption {
	return consumerOpt(func(o *options) { o.maxAttempts = n })
}

// WithBackoff sets the exponential backoff between retries of the
// [Consumer] and the [Canceller] (doubling from min up to max, with jitter).
// Default 50 ms .. 5 s.
func WithBackoff(min, max time.Duration) BackoffOption {
	return BackoffOption(func(o *options) { o.backoffMin, o.backoffMax = min, max })
}

// WithDeadLetter sets where the [Consumer] sends poison messages. Without
// one, a poison message stops [Consumer.Consume] with [ErrNoDeadLetter].
// Default none; a nil d fails [NewConsumer] with [ErrInvalidConfig].
func WithDeadLetter(d DeadLetter) ConsumerOption {
	return consumerOpt(func(o *options) {
		if d == nil {
			o.fail("nil dead-letter sink")
			return
		}
		o.deadLetter = d
	})
}

// WithResults makes the [Consumer] record SUCCESS/FAILED, the [Submitter]
// record QUEUED, and the [Fence] (and so the [Reconciler]) record FAILED
// after a release, in r. Default none; a nil r fails the constructor with
// [ErrInvalidConfig].
func WithResults(r *Results) ResultsWriterOption {
	return ResultsWriterOption(func(o *options) {
		if r == nil {
			o.fail("nil results")
			return
		}
		o.results = r
	})
}

// WithNotifier sets who the [Consumer] tells about each outcome after the DB
// commit (at least once). Default none; a nil n fails [NewConsumer] with
// [ErrInvalidConfig].
func WithNotifier(n Notifier) ConsumerOption {
	return consumerOpt(func(o *options) {
		if n == nil {
			o.fail("nil notifier")
			return
		}
		o.notifier = n
	})
}

// WithScheduler makes the [Consumer] schedule each new order's unpaid
// cancellation (e.g. on a [Canceller]) after commit. The DB scan of the
// Canceller is the backstop when scheduling fails. Default none; a nil s
// fails [NewConsumer] with [ErrInvalidConfig].
func WithScheduler(s Scheduler) ConsumerOption {
	return consumerOpt(func(o *options) {
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
	return consumerOpt(func(o *options) { o.health = f })
}

// WithResultTTL sets how long [Results] keeps a status in Redis. Default 24 h.
func WithResultTTL(d time.Duration) ResultsOption {
	return resultsOpt(func(o *options) { o.resultTTL = d })
}

// WithOnPayCancelled sets the refund hook: [Canceller.Pay] calls it (outside
// any lock or transaction) when a payment arrives for a cancelled order.
// Default none.
func WithOnPayCancelled(f func(ctx context.Context, o Order)) CancellerOption {
	return cancellerOpt(func(o *options) { o.onPayCancel = f })
}

// WithOnError sets a hook for failures handled in the background (a result
// not written, a release given up to the reconciler, a cancellation to be
// retried). Default none.
func WithOnError(f func(ctx context.Context, err error)) OnErrorOption {
	return OnErrorOption(func(o *options) { o.onError = f })
}

// WithPollInterval sets how often [Canceller.Run] polls the delay queue.
// Default 1 s.
func WithPollInterval(d time.Duration) CancellerOption {
	return cancellerOpt(func(o *options) { o.poll = d })
}

// WithScanInterval sets how often [Canceller.Run] scans the DB for expired
// CREATED orders (the backstop of the delay queue). Default 1 minute.
func WithScanInterval(d time.Duration) CancellerOption {
	return cancellerOpt(func(o *options) { o.scan = d })
}

// WithScanBatch sets how many orders one scan or poll cancels at most.
// Default 200.
func WithScanBatch(n int) CancellerOption {
	return cancellerOpt(func(o *options) { o.scanBatch = n })
}

// WithGrace sets how old a reservation without order must be before the
// [Reconciler] releases it. Default 10 minutes.
func WithGrace(d time.Duration) ReconcilerOption {
	return reconcilerOpt(func(o *options) { o.grace = d })
}

// WithDryRun makes the [Reconciler] report what it would repair without
// releasing anything. Default false.
func WithDryRun(b bool) ReconcilerOption {
	return reconcilerOpt(func(o *options) { o.dryRun = b })
}

// WithPending tells the [Reconciler] how to ask whether a reservation still
// has a message on its way (outbox row, queue). Default: none pending; a
// nil p fails [NewReconciler] with [ErrInvalidConfig].
func WithPending(p Pending) ReconcilerOption {
	return reconcilerOpt(func(o *options) {
		if p == nil {
			o.fail("nil pending")
			return
		}
		o.pending = p
	})
}

// WithReleaseAttempts sets how many times the [Consumer] tries to release a
// reservation of a failed order before leaving it to the [Reconciler].
// Default 3.
func WithReleaseAttempts(n int) ConsumerOption {
	return consumerOpt(func(o *options) { o.releaseTry = n })
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
// dead-letter sink (no order, no dedup row: the [Reconciler] releases
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
	return processorOpt(func(o *options) {
		if h == nil {
			o.fail("nil tx hook")
			return
		}
		o.txHook = h
	})
}
