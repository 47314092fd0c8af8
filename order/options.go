package order

import (
	"context"
	"io"
	"log/slog"
	"time"

	"gorm.io/gorm"
)

// Clock supplies the current time; inject one with [WithClock] in tests.
type Clock interface{ Now() time.Time }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// Option configures the constructors of this package. Each option documents
// the types it applies to; an option that does not apply to a type is
// ignored. A nil Option is ignored.
type Option interface{ apply(*options) }

// optionFunc is an Option made of a function.
type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

type options struct {
	clock       Clock
	logger      *slog.Logger
	prefix      string
	payTimeout  time.Duration
	batchSize   int
	linger      time.Duration
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
	leaseTTL    time.Duration
	epoch       time.Time
	floorMs     int64
	releaseTry  int
	tables      Tables
	txHook      TxHook
	canceller   *Canceller                                                           // orders.go
	observer    Observer                                                             // observe.go
	headers     func(ctx context.Context) map[string]string                          // trace.go
	contextFrom func(ctx context.Context, headers map[string]string) context.Context // trace.go
}

func defaultOptions() options {
	return options{
		clock:       systemClock{},
		logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
		prefix:      "seckill:",
		payTimeout:  30 * time.Minute,
		batchSize:   500,
		linger:      5 * time.Millisecond,
		maxAttempts: 5,
		backoffMin:  50 * time.Millisecond,
		backoffMax:  5 * time.Second,
		resultTTL:   24 * time.Hour,
		poll:        time.Second,
		scan:        time.Minute,
		scanBatch:   200,
		grace:       10 * time.Minute,
		leaseTTL:    30 * time.Second,
		epoch:       time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC),
		releaseTry:  3,
		tables:      DefaultTables(),
	}
}

func buildOptions(opts []Option) options {
	o := defaultOptions()
	for _, opt := range opts {
		if opt != nil {
			opt.apply(&o)
		}
	}
	return o
}

// WithClock sets the source of "now" for expiry times, results, the
// cancellation queue, the reconciler's grace period and the ID generator.
// Default: the system clock.
func WithClock(c Clock) Option {
	return optionFunc(func(o *options) {
		if c != nil {
			o.clock = c
		}
	})
}

// WithLogger sets a logger for failures that are handled but worth seeing
// (a result write that failed, a release retried). Default: discard.
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(o *options) {
		if l != nil {
			o.logger = l
		}
	})
}

// WithKeyPrefix sets the Redis key prefix of [Results], [Canceller] and
// [AcquireMachineID]. Default "seckill:".
func WithKeyPrefix(p string) Option { return optionFunc(func(o *options) { o.prefix = p }) }

// WithPayTimeout sets how long a new order waits for payment before the
// [Canceller] cancels it ([Processor]). Default 30 minutes.
func WithPayTimeout(d time.Duration) Option { return optionFunc(func(o *options) { o.payTimeout = d }) }

// WithBatchSize sets the most messages the [Consumer] writes in one DB
// transaction. 1 selects the one-transaction-per-message path. Default 500.
func WithBatchSize(n int) Option { return optionFunc(func(o *options) { o.batchSize = n }) }

// WithLinger sets how long the [Consumer] waits for more messages before
// writing a batch that is not full. 0 writes whatever is already buffered.
// Default 5 ms.
func WithLinger(d time.Duration) Option { return optionFunc(func(o *options) { o.linger = d }) }

// WithMaxAttempts sets how many times the [Consumer] tries one message,
// while the database is healthy, before it is treated as poison and sent to
// the dead-letter sink. Attempts made while the health check fails (the DB
// is down) are not counted. Default 5.
func WithMaxAttempts(n int) Option { return optionFunc(func(o *options) { o.maxAttempts = n }) }

// WithBackoff sets the exponential backoff between retries of the
// [Consumer] and the [Canceller] (doubling from min up to max, with jitter).
// Default 50 ms .. 5 s.
func WithBackoff(min, max time.Duration) Option {
	return optionFunc(func(o *options) { o.backoffMin, o.backoffMax = min, max })
}

// WithDeadLetter sets where the [Consumer] sends poison messages. Without
// one, a poison message stops ConsumeClaim with [ErrNoDeadLetter]. Default none.
func WithDeadLetter(d DeadLetter) Option { return optionFunc(func(o *options) { o.deadLetter = d }) }

// WithResults makes the [Consumer] record SUCCESS/FAILED and the
// [Submitter] record QUEUED in r. Default none.
func WithResults(r *Results) Option { return optionFunc(func(o *options) { o.results = r }) }

// WithNotifier sets who the [Consumer] tells about each outcome after the DB
// commit (at least once). Default none.
func WithNotifier(n Notifier) Option { return optionFunc(func(o *options) { o.notifier = n }) }

// WithScheduler makes the [Consumer] schedule each new order's unpaid
// cancellation (e.g. on a [Canceller]) after commit. The DB scan of the
// Canceller is the backstop when scheduling fails. Default none.
func WithScheduler(s Scheduler) Option { return optionFunc(func(o *options) { o.scheduler = s }) }

// WithHealthCheck sets how the [Consumer] tells "the database is down"
// (retry forever, do not count attempts) from "this message fails". Default:
// ping the *gorm.DB's sql.DB.
func WithHealthCheck(f func(context.Context) error) Option {
	return optionFunc(func(o *options) { o.health = f })
}

// WithResultTTL sets how long [Results] keeps a status in Redis. Default 24 h.
func WithResultTTL(d time.Duration) Option { return optionFunc(func(o *options) { o.resultTTL = d }) }

// WithOnPayCancelled sets the refund hook: [Canceller.Pay] calls it (outside
// any lock or transaction) when a payment arrives for a cancelled order.
// Default none.
func WithOnPayCancelled(f func(ctx context.Context, o Order)) Option {
	return optionFunc(func(o *options) { o.onPayCancel = f })
}

// WithOnError sets a hook for failures handled in the background (a result
// not written, a release given up to the reconciler, a cancellation to be
// retried). Default none.
func WithOnError(f func(ctx context.Context, err error)) Option {
	return optionFunc(func(o *options) { o.onError = f })
}

// WithPollInterval sets how often [Canceller.Run] polls the delay queue.
// Default 1 s.
func WithPollInterval(d time.Duration) Option { return optionFunc(func(o *options) { o.poll = d }) }

// WithScanInterval sets how often [Canceller.Run] scans the DB for expired
// CREATED orders (the backstop of the delay queue). Default 1 minute.
func WithScanInterval(d time.Duration) Option { return optionFunc(func(o *options) { o.scan = d }) }

// WithScanBatch sets how many orders one scan or poll cancels at most.
// Default 200.
func WithScanBatch(n int) Option { return optionFunc(func(o *options) { o.scanBatch = n }) }

// WithGrace sets how old a reservation without order must be before the
// [Reconciler] releases it. Default 10 minutes.
func WithGrace(d time.Duration) Option { return optionFunc(func(o *options) { o.grace = d }) }

// WithDryRun makes the [Reconciler] report what it would repair without
// releasing anything. Default false.
func WithDryRun(b bool) Option { return optionFunc(func(o *options) { o.dryRun = b }) }

// WithPending tells the [Reconciler] how to ask whether a reservation still
// has a message on its way (outbox row, queue). Default: none pending.
func WithPending(p Pending) Option { return optionFunc(func(o *options) { o.pending = p }) }

// WithLeaseTTL sets the TTL of a machine-ID lease ([AcquireMachineID]); it
// is renewed every TTL/3. Default 30 s.
func WithLeaseTTL(d time.Duration) Option { return optionFunc(func(o *options) { o.leaseTTL = d }) }

// WithEpoch sets the ID generator's epoch. Default 2024-01-01 UTC. Changing
// it on a running system can repeat IDs.
func WithEpoch(t time.Time) Option { return optionFunc(func(o *options) { o.epoch = t }) }

// WithReleaseAttempts sets how many times the [Consumer] tries to release a
// reservation of a failed order before leaving it to the [Reconciler].
// Default 3.
func WithReleaseAttempts(n int) Option { return optionFunc(func(o *options) { o.releaseTry = n }) }

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
// none.
func WithTxHook(h TxHook) Option { return optionFunc(func(o *options) { o.txHook = h }) }
