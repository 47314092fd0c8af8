package admin

import (
	"fmt"
	"log/slog"
	"strings"
	"time"
)

// Clock tells the time of audit rows and of the dry-run window.
type Clock interface{ Now() time.Time }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// Option configures [New]; build one with the With… functions. A nil
// Option is ignored.
type Option interface{ apply(*options) }

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

type options struct {
	prefix        string
	table         string
	clock         Clock
	log           *slog.Logger
	maxBody       int64
	dryRunWindow  time.Duration
	actionTimeout time.Duration
	errs          []string
}

func (o *options) fail(format string, args ...any) {
	o.errs = append(o.errs, fmt.Sprintf(format, args...))
}

// The defaults of the options, as their docs state them.
const (
	defaultTable         = "seckill_admin_audit"
	defaultMaxBody       = 64 << 10
	defaultDryRunWindow  = 5 * time.Minute
	defaultActionTimeout = 30 * time.Second
)

// WithPrefix sets the path the handler's routes live under, e.g. "/admin/"
// when mounted with mux.Handle("/admin/", h). It must start and end with
// "/". Default "/".
func WithPrefix(p string) Option { return optionFunc(func(o *options) { o.prefix = p }) }

// WithTable names the audit table: a plain lower-case SQL identifier
// ([a-z_][a-z0-9_]*) of at most [MaxTableLen] bytes. Default
// "seckill_admin_audit".
func WithTable(name string) Option { return optionFunc(func(o *options) { o.table = name }) }

// WithClock sets the clock of audit timestamps and of the dry-run window
// (nil is [ErrInvalidConfig]). Default: the system clock.
func WithClock(c Clock) Option {
	return optionFunc(func(o *options) {
		if c == nil {
			o.fail("nil clock")
		}
		o.clock = c
	})
}

// WithLogger sets the logger of internal errors (which are never sent to
// the client). nil is [ErrInvalidConfig]: to silence it, pass
// slog.New(slog.DiscardHandler). Default: slog.Default().
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(o *options) {
		if l == nil {
			o.fail("nil logger")
		}
		o.log = l
	})
}

// WithMaxBody caps a POST body, in bytes (> 0); a longer body is answered
// 413 payload_too_large. Default 64 KiB.
func WithMaxBody(n int64) Option { return optionFunc(func(o *options) { o.maxBody = n }) }

// WithDryRunWindow sets how long a reconcile dry run's ID stays valid for
// the reconcile that applies it (> 0). Default 5 minutes.
func WithDryRunWindow(d time.Duration) Option {
	return optionFunc(func(o *options) { o.dryRunWindow = d })
}

// WithActionTimeout bounds one backend mutation (> 0). Mutations run on a
// context detached from the client's, so that a client that disconnects
// cannot leave an action half-done and its audit row unfinished. Default
// 30 seconds.
func WithActionTimeout(d time.Duration) Option {
	return optionFunc(func(o *options) { o.actionTimeout = d })
}

// MaxTableLen is the longest audit table name [WithTable] accepts (its
// index names must fit PostgreSQL's 63 bytes).
const MaxTableLen = 48

func buildOptions(opts []Option) (options, error) {
	o := options{
		prefix:        "/",
		table:         defaultTable,
		clock:         systemClock{},
		log:           slog.Default(),
		maxBody:       defaultMaxBody,
		dryRunWindow:  defaultDryRunWindow,
		actionTimeout: defaultActionTimeout,
	}
	for _, opt := range opts {
		if opt != nil {
			opt.apply(&o)
		}
	}
	switch {
	case len(o.errs) > 0:
		return o, fmt.Errorf("%w: %s", ErrInvalidConfig, strings.Join(o.errs, "; "))
	case !strings.HasPrefix(o.prefix, "/") || !strings.HasSuffix(o.prefix, "/") || strings.ContainsAny(o.prefix, "{} \t"):
		return o, fmt.Errorf("%w: prefix %q must start and end with /", ErrInvalidConfig, o.prefix)
	case o.maxBody <= 0:
		return o, fmt.Errorf("%w: max body %d", ErrInvalidConfig, o.maxBody)
	case o.dryRunWindow <= 0:
		return o, fmt.Errorf("%w: dry-run window %v", ErrInvalidConfig, o.dryRunWindow)
	case o.actionTimeout <= 0:
		return o, fmt.Errorf("%w: action timeout %v", ErrInvalidConfig, o.actionTimeout)
	}
	return o, validTableName(o.table)
}

// validTableName checks that name is a plain lower-case identifier, the
// same on MySQL, PostgreSQL (no case folding) and SQLite.
func validTableName(name string) error {
	if name == "" || len(name) > MaxTableLen {
		return fmt.Errorf("%w: table name %q: want 1..%d bytes", ErrInvalidConfig, name, MaxTableLen)
	}
	for i, c := range []byte(name) {
		if !(c == '_' || 'a' <= c && c <= 'z' || i > 0 && '0' <= c && c <= '9') {
			return fmt.Errorf("%w: table name %q is not a plain lower-case SQL identifier ([a-z_][a-z0-9_]*)", ErrInvalidConfig, name)
		}
	}
	return nil
}
