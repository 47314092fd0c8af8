package outbox

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/seckillkit/seckill/observe"
)

// Clock supplies the current time. All timestamps the package stores and
// compares (created_at, next_attempt_at, sent_at, retention) come from it.
// The relay's idle wait between polls uses real timers.
type Clock interface{ Now() time.Time }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// ClaimMode is how a [Relay] claims a batch of rows.
type ClaimMode int

const (
	// ClaimAuto picks [ClaimSkipLocked] for mysql and postgres dialects and
	// [ClaimAtomicUpdate] for sqlite; other dialects make [NewRelay] fail
	// with [ErrUnsupportedDialect].
	ClaimAuto ClaimMode = iota
	// ClaimSkipLocked claims in a short READ COMMITTED transaction:
	// SELECT id … ORDER BY next_attempt_at LIMIT n FOR UPDATE SKIP LOCKED,
	// then UPDATE those ids to take a lease. Needs MySQL 8.0+, MariaDB
	// 10.6+ or PostgreSQL 9.5+. Relays never wait for each other.
	ClaimSkipLocked
	// ClaimForUpdate is ClaimSkipLocked without SKIP LOCKED, for older
	// MySQL/MariaDB: still correct, but concurrent relays queue on the
	// locked rows while a claim transaction is open (milliseconds).
	ClaimForUpdate
	// ClaimAtomicUpdate claims with one statement,
	// UPDATE … SET lease WHERE id IN (SELECT id … LIMIT n), then reads the
	// rows back by their lease token. Correct on SQLite, whose writers are
	// serialised by the database lock (SQLite has no row locks). Not valid
	// on MySQL, which forbids LIMIT in such a subquery, and not safe on
	// PostgreSQL, where two concurrent claims can pick the same rows from
	// their snapshots (use ClaimSkipLocked there, the default).
	ClaimAtomicUpdate
)

// String names the mode.
func (m ClaimMode) String() string {
	switch m {
	case ClaimAuto:
		return "auto"
	case ClaimSkipLocked:
		return "skip-locked"
	case ClaimForUpdate:
		return "for-update"
	case ClaimAtomicUpdate:
		return "atomic-update"
	}
	return fmt.Sprintf("ClaimMode(%d)", int(m))
}

// Options belong to one constructor: [NewWriter] takes [WriterOption]s and
// [NewRelay] takes [RelayOption]s, so an option that means nothing to a
// constructor does not compile there ([WithBatchSize] is a
// [RelayOnlyOption] and cannot be given to NewWriter). An option that
// applies to both ([WithClock], [WithLogger], [WithObserver], [WithTable])
// is an [Option], which implements both interfaces. A nil option is
// ignored.
type (
	// WriterOption configures [NewWriter].
	WriterOption interface{ applyWriter(*options) }
	// RelayOption configures [NewRelay].
	RelayOption interface{ applyRelay(*options) }
	// Option configures both a [Writer] and a [Relay].
	Option interface {
		WriterOption
		RelayOption
	}
)

// optionFunc is an [Option] made of a function.
type optionFunc func(*options)

func (f optionFunc) applyWriter(o *options) { f.apply(o) }
func (f optionFunc) applyRelay(o *options)  { f.apply(o) }
func (f optionFunc) apply(o *options) {
	if f != nil {
		f(o)
	}
}

// WriterOnlyOption is an option only [NewWriter] reads
// ([WithStoreTimeout]).
type WriterOnlyOption func(*options)

func (f WriterOnlyOption) applyWriter(o *options) {
	if f != nil {
		f(o)
	}
}

// RelayOnlyOption is an option only [NewRelay] reads.
type RelayOnlyOption func(*options)

func (f RelayOnlyOption) applyRelay(o *options) {
	if f != nil {
		f(o)
	}
}

// TableOption names the outbox table: see [WithTable]. It is an [Option]
// of [NewWriter] and [NewRelay], and the only option of the functions that
// take a database ([AutoMigrate], [Schema], [Stats], [Pending],
// [HasPending], [HasPendingRef], [Lookup], [Failed]). A nil TableOption is
// ignored.
type TableOption func(*tableOptions)

type tableOptions struct{ name string }

func (f TableOption) applyWriter(o *options) { f.apply(o) }
func (f TableOption) applyRelay(o *options)  { f.apply(o) }
func (f TableOption) apply(o *options) {
	if f != nil {
		f(&o.table)
	}
}

// WithTable names the outbox table instead of [TableName], so that several
// outboxes (say, one per service sharing a database) live side by side.
// The name must be a plain lower-case SQL identifier: a letter or
// underscore, then letters, digits or underscores, at most [MaxTableLen]
// bytes (so that the index names derived from it, such as
// idx_<name>_topic_key, fit PostgreSQL's 63-byte limit). Anything else
// makes the constructor or function fail with [ErrInvalidOption]. Writer,
// relays, queries and [AutoMigrate] must all be given the same name.
// Default [TableName].
func WithTable(name string) TableOption { return func(t *tableOptions) { t.name = name } }

// MaxTableLen is the longest table name [WithTable] accepts.
const MaxTableLen = 49

// tableName applies opts and returns the validated table name.
func tableName(opts []TableOption) (string, error) {
	t := tableOptions{name: TableName}
	for _, opt := range opts {
		if opt != nil {
			opt(&t)
		}
	}
	return t.name, validTableName(t.name)
}

// validTableName checks that name is a plain lower-case identifier, the
// same on MySQL, PostgreSQL (no case folding) and SQLite.
func validTableName(name string) error {
	if name == "" {
		return fmt.Errorf("%w: empty table name", ErrInvalidOption)
	}
	if len(name) > MaxTableLen {
		return fmt.Errorf("%w: table name %q longer than %d bytes", ErrInvalidOption, name, MaxTableLen)
	}
	for i, c := range []byte(name) {
		ok := c == '_' || 'a' <= c && c <= 'z' || i > 0 && '0' <= c && c <= '9'
		if !ok {
			return fmt.Errorf("%w: table name %q is not a plain lower-case SQL identifier ([a-z_][a-z0-9_]*)", ErrInvalidOption, name)
		}
	}
	return nil
}

type options struct {
	clock  Clock
	logger *slog.Logger
	table  tableOptions

	// relay
	batchSize    int
	pollInterval time.Duration
	lease        time.Duration
	maxAttempts  int
	backoffBase  time.Duration
	backoffMax   time.Duration
	jitter       float64
	markTimeout  time.Duration
	retention    time.Duration
	cleanupEvery time.Duration
	cleanup      bool
	concurrency  int
	claimMode    ClaimMode
	onSent       func(Message)
	onRetry      func(Message, error, time.Time)
	onFailed     func(Message, error)
	onError      func(error)
	storeTimeout time.Duration
	cleanupLimit int
	observer     observe.Observer
	backlogEvery time.Duration
}

func defaultOptions() options {
	return options{
		clock:        systemClock{},
		table:        tableOptions{name: TableName},
		logger:       slog.New(slog.DiscardHandler),
		batchSize:    100,
		pollInterval: 100 * time.Millisecond,
		lease:        30 * time.Second,
		maxAttempts:  10,
		backoffBase:  time.Second,
		backoffMax:   5 * time.Minute,
		jitter:       0.2,
		markTimeout:  5 * time.Second,
		retention:    24 * time.Hour,
		cleanupEvery: time.Minute,
		cleanup:      true,
		concurrency:  1,
		storeTimeout: 5 * time.Second,
		cleanupLimit: 1000,
		backlogEvery: 10 * time.Second,
	}
}

// buildOptions applies opts (nil ones are ignored) with apply, the method
// of the constructor's option interface, and validates the result.
func buildOptions[O comparable](opts []O, apply func(O, *options)) (options, error) {
	o := defaultOptions()
	var zero O
	for _, opt := range opts {
		if opt != zero {
			apply(opt, &o)
		}
	}
	if err := validTableName(o.table.name); err != nil {
		return o, err
	}
	switch {
	case o.clock == nil:
		return o, fmt.Errorf("%w: nil clock", ErrInvalidOption)
	case o.logger == nil:
		return o, fmt.Errorf("%w: nil logger", ErrInvalidOption)
	case o.batchSize <= 0:
		return o, fmt.Errorf("%w: batch size %d <= 0", ErrInvalidOption, o.batchSize)
	case o.pollInterval <= 0:
		return o, fmt.Errorf("%w: poll interval %v <= 0", ErrInvalidOption, o.pollInterval)
	case o.lease <= 0:
		return o, fmt.Errorf("%w: lease %v <= 0", ErrInvalidOption, o.lease)
	case o.maxAttempts <= 0:
		return o, fmt.Errorf("%w: max attempts %d <= 0", ErrInvalidOption, o.maxAttempts)
	case o.backoffBase <= 0 || o.backoffMax < o.backoffBase:
		return o, fmt.Errorf("%w: backoff base %v, max %v", ErrInvalidOption, o.backoffBase, o.backoffMax)
	case o.jitter < 0 || o.jitter > 1:
		return o, fmt.Errorf("%w: jitter %v not in [0,1]", ErrInvalidOption, o.jitter)
	case o.markTimeout <= 0:
		return o, fmt.Errorf("%w: mark timeout %v <= 0", ErrInvalidOption, o.markTimeout)
	case o.storeTimeout <= 0:
		return o, fmt.Errorf("%w: store timeout %v <= 0", ErrInvalidOption, o.storeTimeout)
	case o.cleanup && (o.retention <= 0 || o.cleanupEvery <= 0):
		return o, fmt.Errorf("%w: retention %v, cleanup every %v", ErrInvalidOption, o.retention, o.cleanupEvery)
	case o.backlogEvery <= 0:
		return o, fmt.Errorf("%w: backlog interval %v <= 0", ErrInvalidOption, o.backlogEvery)
	case o.concurrency <= 0:
		return o, fmt.Errorf("%w: publish concurrency %d <= 0", ErrInvalidOption, o.concurrency)
	case o.claimMode < ClaimAuto || o.claimMode > ClaimAtomicUpdate:
		return o, fmt.Errorf("%w: claim mode %v", ErrInvalidOption, o.claimMode)
	}
	return o, nil
}

// WithClock sets the clock for every stored or compared timestamp.
// Default: the system clock.
func WithClock(c Clock) Option { return optionFunc(func(o *options) { o.clock = c }) }

// WithLogger sets the logger. Default: a logger that discards everything.
func WithLogger(l *slog.Logger) Option { return optionFunc(func(o *options) { o.logger = l }) }

// WithStoreTimeout bounds the outbox insert that [Writer.SendOrStore] runs
// after a failed publish, on a context that ignores the caller's
// cancellation (the store is the compensation). Writer only. Default 5s.
func WithStoreTimeout(d time.Duration) WriterOnlyOption {
	return func(o *options) { o.storeTimeout = d }
}

// WithBatchSize sets how many rows a relay claims per poll. Relay only.
// Default 100.
func WithBatchSize(n int) RelayOnlyOption { return func(o *options) { o.batchSize = n } }

// WithPollInterval sets how long an idle relay waits before polling again
// (a relay that claimed a full batch polls again at once). Relay only.
// Default 100ms.
func WithPollInterval(d time.Duration) RelayOnlyOption {
	return func(o *options) { o.pollInterval = d }
}

// WithLease sets how long a claimed row stays invisible to other relays.
// It must exceed the time to publish and mark one batch: a relay that
// outlives its lease may see its rows published again by another relay
// (a duplicate, never a loss). Publishing a batch gets a context deadline
// of 80 % of the lease. A relay that crashes leaves its rows to be
// reclaimed when the lease ends. Relay only. Default 30s.
func WithLease(d time.Duration) RelayOnlyOption { return func(o *options) { o.lease = d } }

// WithMaxAttempts sets the publish attempts after which a row becomes
// FAILED and the OnFailed hook runs. Relay only. Default 10.
func WithMaxAttempts(n int) RelayOnlyOption { return func(o *options) { o.maxAttempts = n } }

// WithBackoff sets the retry delay after the k-th failed attempt to
// min(base·2^(k-1), max), before jitter. Relay only. Default 1s, 5m.
func WithBackoff(base, max time.Duration) RelayOnlyOption {
	return func(o *options) { o.backoffBase, o.backoffMax = base, max }
}

// WithJitter sets the random fraction f in [0,1] taken off each backoff:
// the delay d becomes a uniform value in [d·(1-f), d]. 0 disables jitter.
// Relay only. Default 0.2.
func WithJitter(f float64) RelayOnlyOption { return func(o *options) { o.jitter = f } }

// WithMarkTimeout bounds the database writes that settle a published
// batch (SENT, retry, FAILED). They run on context.WithoutCancel so that a
// relay stopped mid-batch still records what it published. Relay only.
// Default 5s.
func WithMarkTimeout(d time.Duration) RelayOnlyOption {
	return func(o *options) { o.markTimeout = d }
}

// WithRetention makes [Relay.Run] delete SENT rows whose sent_at is older
// than retention, checking every `every` of clock time. Relay only.
// Default 24h, every 1m.
func WithRetention(retention, every time.Duration) RelayOnlyOption {
	return func(o *options) { o.retention, o.cleanupEvery, o.cleanup = retention, every, true }
}

// WithoutCleanup stops [Relay.Run] from deleting SENT rows (call
// [Relay.Cleanup] yourself, or keep them). Relay only.
func WithoutCleanup() RelayOnlyOption { return func(o *options) { o.cleanup = false } }

// WithPublishConcurrency publishes a batch on n goroutines, rows with the
// same key always on the same goroutine in table order. Ignored when the
// publisher is a [BatchPublisher]. Relay only. Default 1.
func WithPublishConcurrency(n int) RelayOnlyOption { return func(o *options) { o.concurrency = n } }

// WithClaimMode forces a claim strategy. Relay only. Default [ClaimAuto].
func WithClaimMode(m ClaimMode) RelayOnlyOption { return func(o *options) { o.claimMode = m } }

// WithOnSent sets a hook called for each row marked SENT, after the mark
// committed, outside any lock. Relay only. Default none.
func WithOnSent(f func(m Message)) RelayOnlyOption { return func(o *options) { o.onSent = f } }

// WithOnRetry sets a hook called for each failed publish that will be
// retried at next, after the retry was recorded. Relay only. Default none.
func WithOnRetry(f func(m Message, err error, next time.Time)) RelayOnlyOption {
	return func(o *options) { o.onRetry = f }
}

// WithOnFailed sets the alert hook called for each row that became FAILED
// (attempt budget spent), after that was recorded. Relay only. Default none.
func WithOnFailed(f func(m Message, err error)) RelayOnlyOption {
	return func(o *options) { o.onFailed = f }
}

// WithOnError sets a hook called by [Relay.Run] for each poll or clean-up
// that failed on the database (Run logs and keeps going). Relay only.
// Default none.
func WithOnError(f func(err error)) RelayOnlyOption { return func(o *options) { o.onError = f } }

// WithObserver reports to o, synchronously and with the caller's ctx:
// every [Writer.Write] and [Writer.SendOrStore] (Writer), every relay batch
// and the backlog gauges (Relay); see [StageWrite] for the names. A nil o
// is ignored. Without an observer nothing is measured and Run reads no
// backlog. Writer and Relay. Default none.
func WithObserver(o observe.Observer) Option {
	return optionFunc(func(opts *options) {
		if o != nil {
			opts.observer = o
		}
	})
}

// WithBacklogInterval sets how often [Relay.Run] reads the backlog
// ([Relay.Backlog]: three COUNT-style queries) to report the gauges
// "outbox.pending", "outbox.oldest_pending_seconds" and "outbox.failed" to
// the observer, measured on the relay's clock like [WithRetention]: Run
// reads it at its first poll, then at the first poll at least d later.
// Only with [WithObserver]. d must be positive. Relay only. Default 10s.
func WithBacklogInterval(d time.Duration) RelayOnlyOption {
	return func(o *options) { o.backlogEvery = d }
}
