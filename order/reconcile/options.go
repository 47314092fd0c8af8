package reconcile

import (
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/seckillkit/seckill/internal/observe"
	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/order/handoff"
)

// Option configures [NewReconciler]: [WithClock], [WithLogger],
// [WithResults], [WithObserver], [WithTables], [WithGrace], [WithDryRun],
// [WithPending], [WithPendingPass]. A nil option is ignored.
type Option interface{ apply(*options) }

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

type options struct {
	clock    order.Clock
	logger   *slog.Logger
	results  order.ResultWriter
	observer observe.Observer
	tables   order.Tables
	grace    time.Duration
	dryRun   bool
	pending  Pending
	pass     PendingPass
	err      error // the first invalid option
}

func (o *options) fail(format string, args ...any) {
	if o.err == nil {
		o.err = fmt.Errorf("%w: "+format, append([]any{order.ErrInvalidConfig}, args...)...)
	}
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func buildOptions(opts []Option) (options, error) {
	o := options{clock: systemClock{}, logger: slog.New(slog.NewTextHandler(io.Discard, nil)), grace: 10 * time.Minute}
	for _, opt := range opts {
		if opt != nil {
			opt.apply(&o)
		}
	}
	return o, o.err
}

// fenceOptions are the options of the [handoff.Fence] the reconciler
// releases through.
func (o *options) fenceOptions() []handoff.FenceOption {
	fo := []handoff.FenceOption{handoff.WithClock(o.clock), handoff.WithLogger(o.logger)}
	if o.results != nil {
		fo = append(fo, handoff.WithResults(o.results))
	}
	return append(fo, handoff.WithTables(o.tables))
}

// WithClock sets the source of "now" for the grace period and the fence
// rows. Default: the system clock; a nil c fails [NewReconciler] with
// order.ErrInvalidConfig.
func WithClock(c order.Clock) Option {
	return optionFunc(func(o *options) {
		if c == nil {
			o.fail("nil clock")
			return
		}
		o.clock = c
	})
}

// WithLogger sets the logger of the fence the reconciler releases through
// (a FAILED result not written). Default: discard; a nil l fails
// [NewReconciler] with order.ErrInvalidConfig.
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(o *options) {
		if l == nil {
			o.fail("nil logger")
			return
		}
		o.logger = l
	})
}

// WithResults makes every release record FAILED (handoff.ReasonReleased) in
// r (status.Results). Default none; a nil r fails [NewReconciler] with
// order.ErrInvalidConfig.
func WithResults(r order.ResultWriter) Option {
	return optionFunc(func(o *options) {
		if r == nil {
			o.fail("nil results")
			return
		}
		o.results = r
	})
}

// Stages reported to [WithObserver], with every [Reconciler.Reconcile]:
// StageReconcile, outcome ok (Value = reservations released, or to be
// released in a dry run) or error, with the call's Duration; and, when
// it succeeded, StageReconcileDrift, a gauge "ok" whose Value is
// [Report.Drift] in units.
const (
	StageReconcile      = "order.reconcile"
	StageReconcileDrift = "order.reconcile_drift"
)

// WithObserver reports every reconcile to o (see [StageReconcile]),
// synchronously, after the call. Default none; a nil o is ignored.
func WithObserver(o observe.Observer) Option {
	return optionFunc(func(opts *options) {
		if o != nil {
			opts.observer = o
		}
	})
}

// WithTables names the order tables (order.WithTables): the reconciler
// must be given the names the consumer writes. Default: the default names.
func WithTables(t order.Tables) Option {
	return optionFunc(func(o *options) { o.tables = t })
}

// WithGrace sets how old a reservation without order must be before the
// [Reconciler] releases it. Default 10 minutes.
func WithGrace(d time.Duration) Option {
	return optionFunc(func(o *options) { o.grace = d })
}

// WithDryRun makes the [Reconciler] report what it would repair without
// releasing anything. Default false.
func WithDryRun(b bool) Option {
	return optionFunc(func(o *options) { o.dryRun = b })
}

// WithPending tells the [Reconciler] how to ask whether a reservation still
// has a message on its way (outbox row, queue). Default: none pending; a
// nil p fails [NewReconciler] with order.ErrInvalidConfig.
func WithPending(p Pending) Option {
	return optionFunc(func(o *options) {
		if p == nil {
			o.fail("nil pending")
			return
		}
		o.pending = p
	})
}

// WithPendingPass tells the [Reconciler] how to ask, once per pass,
// whether reservations still have a message on its way (the consumer
// group's backlog: orderkafka.Positions.Pending). With [WithPending] as
// well, a reservation either reports as pending is pending. A pass that
// fails releases no reservation without an order (each is listed in
// Report.ReleaseErrors). Default: none; a nil p fails [NewReconciler]
// with order.ErrInvalidConfig.
func WithPendingPass(p PendingPass) Option {
	return optionFunc(func(o *options) {
		if p == nil {
			o.fail("nil pending pass")
			return
		}
		o.pass = p
	})
}
