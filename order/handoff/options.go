package handoff

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
//	NewSubmitter    SubmitterOption    WithClock, WithLogger, WithResults, WithObserver
//	NewFence        FenceOption        WithClock, WithLogger, WithResults, WithTables
//
// [WithClock], [WithLogger] and [WithResults] return an [Option], an
// option of both. A nil option is ignored; a nil collaborator fails the
// constructor with order.ErrInvalidConfig.
type (
	// SubmitterOption configures [NewSubmitter].
	SubmitterOption interface{ applySubmitter(*options) }
	// FenceOption configures [NewFence].
	FenceOption interface{ applyFence(*options) }
	// Option is an option of [NewSubmitter] and [NewFence].
	Option interface {
		SubmitterOption
		FenceOption
	}
)

type (
	submitterOption func(*options)
	fenceOption     func(*options)
	optionFunc      func(*options)
)

func (f submitterOption) applySubmitter(o *options) { f(o) }
func (f fenceOption) applyFence(o *options)         { f(o) }
func (f optionFunc) applySubmitter(o *options)      { f(o) }
func (f optionFunc) applyFence(o *options)          { f(o) }

type options struct {
	clock    order.Clock
	logger   *slog.Logger
	results  order.ResultWriter
	observer observe.Observer
	tables   order.Tables
	err      error // the first invalid option
}

func (o *options) fail(format string, args ...any) {
	if o.err == nil {
		o.err = fmt.Errorf("%w: "+format, append([]any{order.ErrInvalidConfig}, args...)...)
	}
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// WithClock sets the source of "now" for a message's zero CreatedAt, the
// fence rows and the results' times. Default: the system clock; a nil c fails
// the constructor with order.ErrInvalidConfig.
func WithClock(c order.Clock) Option {
	return optionFunc(func(o *options) {
		if c == nil {
			o.fail("nil clock")
			return
		}
		o.clock = c
	})
}

// WithLogger sets a logger for failures that are handled but worth seeing
// (a result not written). Default: discard; a nil l fails
// the constructor with order.ErrInvalidConfig (to silence it, pass
// slog.New(slog.DiscardHandler)).
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(o *options) {
		if l == nil {
			o.fail("nil logger")
			return
		}
		o.logger = l
	})
}

// WithResults makes the [Submitter] record QUEUED for every accepted
// message, and the [Fence] FAILED after a release (the reason of the
// release: [ReasonHandoff] for a failed hand-off), in r (status.Results).
// Default none; a nil r fails the constructor with order.ErrInvalidConfig.
// A composition that answers an in-flight reservation from the stock
// ledger (checkout.Checkout.Result does) can leave it off the Submitter,
// saving one Redis round trip per accepted buy, and keep it on the Fence.
func WithResults(r order.ResultWriter) Option {
	return optionFunc(func(o *options) {
		if r == nil {
			o.fail("nil results")
			return
		}
		o.results = r
	})
}

// ReasonReleased is the Reason of a FAILED outcome whose reservation the
// [Fence] released before its message was consumed (by the reconciler, a
// failed hand-off, or an operator): the message deducts nothing when it
// arrives. It is the default of [ReleaseRequest.Reason].
const ReasonReleased = "released"

// ReasonHandoff is the Reason of the FAILED result of a reservation the
// [Submitter] released because neither Kafka nor the fallback took its
// message; the buyer may retry.
const ReasonHandoff = "handoff_failed"

// StageSubmit is the stage [WithObserver] reports, once per
// [Submitter.Submit], with the outcome kafka | outbox | released |
// invalid | error (published; stored by the fallback; both failed and
// the reservation was released; invalid message; both failed and the
// release failed too) and the call's Duration.
const StageSubmit = "order.submit"

// WithObserver reports every [Submitter.Submit] to o ([StageSubmit]),
// synchronously, after the call. Default none; a nil o is ignored.
func WithObserver(o observe.Observer) SubmitterOption {
	return submitterOption(func(opts *options) {
		if o != nil {
			opts.observer = o
		}
	})
}

// WithTables names the order tables (order.WithTables): the fence must be
// given the names the consumer writes. Default: the default names.
func WithTables(t order.Tables) FenceOption {
	return fenceOption(func(o *options) { o.tables = t })
}

func buildOptions[T any](opts []T, apply func(T, *options)) (options, error) {
	o := options{clock: systemClock{}, logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, opt := range opts {
		if any(opt) != nil {
			apply(opt, &o)
		}
	}
	return o, o.err
}

// setResult records r, best effort (the database answers a result Redis
// lacks).
func (o *options) setResult(ctx context.Context, r order.Result) error {
	r.At = o.clock.Now()
	return o.results.SetMany(ctx, []order.Result{r})
}
