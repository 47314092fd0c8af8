package order

import (
	"context"
	"errors"
	"time"

	"github.com/seckillkit/seckill/observe"
)

// Stages and outcomes reported to [WithObserver]. They are stable (metric
// labels); a rename is a breaking change. Activity is set where one
// activity is concerned; Name is empty unless said otherwise.
//
//	stage                  outcome / Value
//	order.consume          ok (Value = SUCCESS outcomes) and failed (Value =
//	                       FAILED outcomes: refusals whose reservation is
//	                       released), one event each per transaction
//	                       written — a batch, or one message on the
//	                       one-by-one path; error (Value = messages in the
//	                       failed attempt, Err set); dead_letter (Value = 1)
//	                       ([Consumer])
//	order.submit           kafka | outbox | released | invalid | error
//	                       ([Submitter.Submit]: published; stored by the
//	                       fallback; both failed and the reservation was
//	                       released; invalid message; both failed and the
//	                       release failed too)
//	order.reconcile        ok (Value = reservations released, or to be
//	                       released in a dry run) | error ([Reconciler])
//	order.reconcile_drift  gauge "ok", Value = [Report.Drift] in units,
//	                       reported with every reconcile that succeeded
//	order.consumer_lag     gauge "ok", Value = the group's Kafka lag in
//	                       messages, Name = the group (orderkafka.ObserveLag); error
//	                       when it could not be read (not a gauge)
//	order.cancel           ok | already_cancelled | already_paid |
//	                       not_found | not_due | release_pending | error
//	                       ([Canceller]: every cancellation attempt —
//	                       Cancel, the delay queue, the DB scan, Pay on an
//	                       expired order)
//
// Operations carry their Duration; the events of one consumer
// transaction carry its whole Duration (count transactions by one
// outcome, orders by Value). The observer gets the operation's context:
// for order.consume the batch's context, which with [WithContextFrom] is
// the one made from the batch's first message (see [WithContextFrom]).
const (
	StageConsume        = "order.consume"
	StageSubmit         = "order.submit"
	StageReconcile      = "order.reconcile"
	StageReconcileDrift = "order.reconcile_drift"
	StageConsumerLag    = "order.consumer_lag"
	StageCancel         = "order.cancel"
)

// WithObserver reports the operations of the [Consumer], the
// [Submitter], the [Reconciler] and the [Canceller] to o (see the
// stages above). The observer is called synchronously, after the
// operation, outside any lock or transaction. Default none (and no cost:
// a nil observer is never called); a nil o is ignored.
func WithObserver(o observe.Observer) ObserverOption {
	return ObserverOption(func(opts *options) {
		if o != nil {
			opts.observer = o
		}
	})
}

func (o *options) observe(ctx context.Context, e observe.Event, start time.Time) {
	if !e.Gauge {
		e.Duration = time.Since(start)
	}
	if e.Outcome != observe.Error {
		e.Err = nil
	}
	o.observer.Observe(ctx, e)
}

// observeStart is the start of an observed consumer operation: the zero
// time, without reading the clock, when there is no observer.
func (c *Consumer) observeStart() time.Time {
	if c.o.observer == nil {
		return time.Time{}
	}
	return time.Now()
}

// observeOutcomes reports one committed consumer transaction; callers
// check c.o.observer first.
func (c *Consumer) observeOutcomes(ctx context.Context, start time.Time, outs []Outcome) {
	ok, failed := 0, 0
	for _, out := range outs {
		if out.Status == StatusFailed {
			failed++
		} else {
			ok++
		}
	}
	msgs := make([]Message, len(outs))
	for i := range outs {
		msgs[i] = outs[i].Message
	}
	act := batchActivity(msgs)
	if ok > 0 {
		c.o.observe(ctx, observe.Event{Stage: StageConsume, Outcome: observe.OK, Activity: act, Value: float64(ok)}, start)
	}
	if failed > 0 {
		c.o.observe(ctx, observe.Event{Stage: StageConsume, Outcome: "failed", Activity: act, Value: float64(failed)}, start)
	}
}

// observeSubmit reports one Submit; callers check s.o.observer.
func (s *Submitter) observeSubmit(ctx context.Context, start time.Time, m Message, route Route, released bool, err error) {
	e := observe.Event{Stage: StageSubmit, Outcome: observe.Error, Activity: m.ActivityID, Err: err}
	switch {
	case route == RouteKafka:
		e.Outcome = "kafka"
	case route == RouteFallback:
		e.Outcome = "outbox"
	case errors.Is(err, ErrInvalidMessage), errors.Is(err, ErrUnsupportedVersion):
		e.Outcome = "invalid"
	case released:
		e.Outcome = "released"
	}
	s.o.observe(ctx, e, start)
}

func cancelOutcome(err error) string {
	if _, ok := errors.AsType[*notDueError](err); ok {
		return "not_due"
	}
	switch {
	case err == nil:
		return observe.OK
	case errors.Is(err, ErrReleasePending):
		return "release_pending"
	case errors.Is(err, ErrAlreadyCancelled):
		return "already_cancelled"
	case errors.Is(err, ErrAlreadyPaid):
		return "already_paid"
	case errors.Is(err, ErrOrderNotFound):
		return "not_found"
	}
	return observe.Error
}

// observeReconcile reports one Reconcile; callers check r.o.observer.
func (r *Reconciler) observeReconcile(ctx context.Context, start time.Time, rep Report, err error) {
	if err == nil {
		r.o.observer.Observe(ctx, observe.Event{Stage: StageReconcileDrift, Outcome: observe.OK, Activity: rep.Activity, Gauge: true,
			Value: float64(rep.Drift)})
	}
	e := observe.Event{Stage: StageReconcile, Outcome: observe.OK, Activity: rep.Activity, Value: float64(len(rep.Released)), Err: err}
	if err != nil {
		e.Outcome = observe.Error
	}
	r.o.observe(ctx, e, start)
}

// batchActivity is the activity of msgs, or "" when they concern several.
func batchActivity(msgs []Message) string {
	if len(msgs) == 0 {
		return ""
	}
	act := msgs[0].ActivityID
	for _, m := range msgs[1:] {
		if m.ActivityID != act {
			return ""
		}
	}
	return act
}
