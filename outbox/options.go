package outbox

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/seckillkit/seckill/internal/observe"
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

// name names the mode in logs and errors.
func (m ClaimMode) name() string {
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
// constructor does not compile there ([WithBatchSize] is a [RelayOption]
// and cannot be given to NewWriter). An option that applies to both
// ([WithClock], [WithLogger], [WithObserver]) is an [Option], which is
// both; [WithTable] is a [TableOption], which is an Option and the only
// option of the functions that take a database ([AutoMigrate], [Schema],
// [Stats], [HasPending], [HasPendingReservation], [Lookup], [Failed]).
// Every option type is an interface, so options are built with the With…
// functions only. A nil option is ignored.
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
	// TableOption names the outbox table ([WithTable]): an [Option] of
	// [NewWriter] and [NewRelay], and the option of the functions that
	// take a database.
	TableOption interface {
		Option
		applyTable(*tableOptions)
	}
)

// optionFunc is an [Option] made of a function.
type optionFunc func(*options)

func (f optionFunc) applyWriter(o *options) { f(o) }
func (f optionFunc) applyRelay(o *options)  { f(o) }

// writerOption is a [WriterOption] only [NewWriter] reads.
type writerOption func(*options)

func (f writerOption) applyWriter(o *options) { f(o) }

// relayOption is a [RelayOption] only [NewRelay] reads.
type relayOption func(*options)

func (f relayOption) applyRelay(o *options) { f(o) }

// tableOption is the [TableOption] of [WithTable].
type tableOption string

func (t tableOption) applyWriter(o *options)     { o.table.name = string(t) }
func (t tableOption) applyRelay(o *options)      { o.table.name = string(t) }
func (t tableOption) applyTable(o *tableOptions) { o.name = string(t) }

type tableOptions struct{ name string }

// WithTable names the outbox table instead of the default
// "outbox_message" ([Message.TableName]), so that several outboxes (say,
// one per service sharing a database) live side by side. The name must be
// a plain lower-case SQL identifier: a letter or underscore, then letters,
// digits or underscores, at most 49 bytes (so that the index names
// derived from it, such as idx_<name>_topic_key, fit PostgreSQL's 63-byte
// limit). Anything else makes the constructor or function fail with
// [ErrInvalidConfig]. Writer, relays, queries and [AutoMigrate] must all
// be given the same name. Default "outbox_message".
func WithTable(name string) TableOption { return tableOption(name) }

// maxTableLen is the longest table name [WithTable] accepts.
const maxTableLen = 49

// tableName applies opts and returns the validated table name.
func tableName(opts []TableOption) (string, error) {
	t := tableOptions{name: defaultTable}
	for _, opt := range opts {
		if opt != nil {
			opt.applyTable(&t)
		}
	}
	return t.name, validTableName(t.name)
}

// validTableName checks that name is a plain lower-case identifier, the
// same on MySQL, PostgreSQL (no case folding) and SQLite.
func validTableName(name string) error {
	if name == "" {
		return fmt.Errorf("%w: empty table name", ErrInvalidConfig)
	}
	if len(name) > maxTableLen {
		return fmt.Errorf("%w: table name %q longer than %d bytes", ErrInvalidConfig, name, maxTableLen)
	}
	for i, c := range []byte(name) {
		ok := c == '_' || 'a' <= c && c <= 'z' || i > 0 && '0' <= c && c <= '9'
		if !ok {
			return fmt.Errorf("%w: table name %q is not a plain lower-case SQL identifier ([a-z_][a-z0-9_]*)", ErrInvalidConfig, name)
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
	onSent       func(context.Context, Message)
	onRetry      func(context.Context, Message, error, time.Time)
	onFailed     func(context.Context, Message, error)
	onError      func(context.Context, error)
	storeTimeout time.Duration
	cleanupLimit int
	observer     observe.Observer
	backlogEvery time.Duration
}

func defaultOptions() options {
	return options{
		clock:        systemClock{},
		table:        tableOptions{name: defaultTable},
		logger:       slog.Default(),
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
		return o, fmt.Errorf("%w: nil clock", ErrInvalidConfig)
	case o.logger == nil:
		return o, fmt.Errorf("%w: nil logger", ErrInvalidConfig)
	case o.batchSize <= 0:
		return o, fmt.Errorf("%w: batch size %d <= 0", ErrInvalidConfig, o.batchSize)
	case o.pollInterval <= 0:
		return o, fmt.Errorf("%w: poll interval %v <= 0", ErrInvalidConfig, o.pollInterval)
	case o.lease <= 0:
		return o, fmt.Errorf("%w: lease %v <= 0", ErrInvalidConfig, o.lease)
	case o.maxAttempts <= 0:
		return o, fmt.Errorf("%w: max attempts %d <= 0", ErrInvalidConfig, o.maxAttempts)
	case o.backoffBase <= 0 || o.backoffMax < o.backoffBase:
		return o, fmt.Errorf("%w: backoff base %v, max %v", ErrInvalidConfig, o.backoffBase, o.backoffMax)
	case o.jitter < 0 || o.jitter > 1:
		return o, fmt.Errorf("%w: jitter %v not in [0,1]", ErrInvalidConfig, o.jitter)
	case o.markTimeout <= 0:
		return o, fmt.Errorf("%w: mark timeout %v <= 0", ErrInvalidConfig, o.markTimeout)
	case o.storeTimeout <= 0:
		return o, fmt.Errorf("%w: store timeout %v <= 0", ErrInvalidConfig, o.storeTimeout)
	case o.cleanup && (o.retention <= 0 || o.cleanupEvery <= 0):
		return o, fmt.Errorf("%w: retention %v, cleanup every %v", ErrInvalidConfig, o.retention, o.cleanupEvery)
	case o.backlogEvery <= 0:
		return o, fmt.Errorf("%w: backlog interval %v <= 0", ErrInvalidConfig, o.backlogEvery)
	case o.concurrency <= 0:
		return o, fmt.Errorf("%w: publish concurrency %d <= 0", ErrInvalidConfig, o.concurrency)
	case o.claimMode < ClaimAuto || o.claimMode > ClaimAtomicUpdate:
		return o, fmt.Errorf("%w: claim mode %v", ErrInvalidConfig, o.claimMode)
	}
	return o, nil
}

// WithClock sets the clock for every stored or compared timestamp.
// Default: the system clock. A nil c is an [ErrInvalidConfig] error.
func WithClock(c Clock) Option { return optionFunc(func(o *options) { o.clock = c }) }

// WithLogger sets the logger. A nil l is an [ErrInvalidConfig] error (to
// silence the outbox, pass slog.New(slog.DiscardHandler)). Default:
// [slog.Default].
func WithLogger(l *slog.Logger) Option { return optionFunc(func(o *options) { o.logger = l }) }

// WithStoreTimeout bounds the outbox insert that [Writer.SendOrStore] runs
// after a failed publish, on a context that ignores the caller's
// cancellation (the store is the compensation). Writer only. Default 5s.
func WithStoreTimeout(d time.Duration) WriterOption {
	return writerOption(func(o *options) { o.storeTimeout = d })
}

// WithBatchSize sets how many rows a relay claims per poll. Relay only.
// Default 100.
func WithBatchSize(n int) RelayOption { return relayOption(func(o *options) { o.batchSize = n }) }

// WithPollInterval sets how long an idle relay waits before polling again
// (a relay that claimed a full batch polls again at once). Relay only.
// Default 100ms.
func WithPollInterval(d time.Duration) RelayOption {
	return relayOption(func(o *options) { o.pollInterval = d })
}

// WithLease sets how long a claimed row stays invisible to other relays.
// It must exceed the time to publish and mark one batch: a relay that
// outlives its lease may see its rows published again by another relay
// (a duplicate, never a loss). Publishing a batch gets a context deadline
// of 80 % of the lease. A relay that crashes leaves its rows to be
// reclaimed when the lease ends. Relay only. Default 30s.
func WithLease(d time.Duration) RelayOption { return relayOption(func(o *options) { o.lease = d }) }

// WithMaxAttempts sets the publish attempts after which a row becomes
// FAILED and the OnFailed hook runs. Relay only. Default 10.
func WithMaxAttempts(n int) RelayOption { return relayOption(func(o *options) { o.maxAttempts = n }) }

// WithBackoff sets the retry delay after the k-th failed attempt to
// min(base·2^(k-1), max), before jitter. Relay only. Default 1s, 5m.
func WithBackoff(base, max time.Duration) RelayOption {
	return relayOption(func(o *options) { o.backoffBase, o.backoffMax = base, max })
}

// WithJitter sets the random fraction f in [0,1] taken off each backoff:
// the delay d becomes a uniform value in [d·(1-f), d]. 0 disables jitter.
// Relay only. Default 0.2.
func WithJitter(f float64) RelayOption { return relayOption(func(o *options) { o.jitter = f }) }

// WithMarkTimeout bounds the database writes that settle a published
// batch (SENT, retry, FAILED). They run on context.WithoutCancel so that a
// relay stopped mid-batch still records what it published. Relay only.
// Default 5s.
func WithMarkTimeout(d time.Duration) RelayOption {
	return relayOption(func(o *options) { o.markTimeout = d })
}

// WithRetention makes [Relay.Run] delete SENT rows whose sent_at is older
// than retention, checking every `every` of clock time. Relay only.
// Default 24h, every 1m.
func WithRetention(retention, every time.Duration) RelayOption {
	return relayOption(func(o *options) { o.retention, o.cleanupEvery, o.cleanup = retention, every, true })
}

// WithoutCleanup stops [Relay.Run] from deleting SENT rows (call
// [Relay.Cleanup] yourself, or keep them). Relay only.
func WithoutCleanup() RelayOption { return relayOption(func(o *options) { o.cleanup = false }) }

// WithPublishConcurrency publishes a batch on n goroutines, rows with the
// same key always on the same goroutine in table order. Ignored when the
// publisher is a [BatchPublisher]. Relay only. Default 1.
func WithPublishConcurrency(n int) RelayOption {
	return relayOption(func(o *options) { o.concurrency = n })
}

// WithClaimMode forces a claim strategy. Relay only. Default [ClaimAuto].
func WithClaimMode(m ClaimMode) RelayOption { return relayOption(func(o *options) { o.claimMode = m }) }

// WithOnSent sets a hook called for each row marked SENT, after the mark
// committed, outside any lock, with the context of the [Relay.RunOnce]
// (under [Relay.Run], of Run) that published it. Relay only. Default none.
func WithOnSent(f func(ctx context.Context, m Message)) RelayOption {
	return relayOption(func(o *options) { o.onSent = f })
}

// WithOnRetry sets a hook called for each failed publish that will be
// retried at next, after the retry was recorded, with the context of the
// batch (as [WithOnSent]). Relay only. Default none.
func WithOnRetry(f func(ctx context.Context, m Message, err error, next time.Time)) RelayOption {
	return relayOption(func(o *options) { o.onRetry = f })
}

// WithOnFailed sets the alert hook called for each row that became FAILED
// (attempt budget spent), after that was recorded, with the context of
// the batch (as [WithOnSent]). Relay only. Default none.
func WithOnFailed(f func(ctx context.Context, m Message, err error)) RelayOption {
	return relayOption(func(o *options) { o.onFailed = f })
}

// WithOnError sets a hook called by [Relay.Run], with Run's context, for
// each poll or clean-up that failed on the database (Run logs and keeps
// going). Relay only. Default none.
func WithOnError(f func(ctx context.Context, err error)) RelayOption {
	return relayOption(func(o *options) { o.onError = f })
}

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
// (three COUNT-style queries, as [Stats]) to report the gauges
// "outbox.pending", "outbox.oldest_pending_seconds" and "outbox.failed" to
// the observer, measured on the relay's clock like [WithRetention]: Run
// reads it at its first poll, then at the first poll at least d later.
// Only with [WithObserver]. d must be positive. Relay only. Default 10s.
func WithBacklogInterval(d time.Duration) RelayOption {
	return relayOption(func(o *options) { o.backlogEvery = d })
}
