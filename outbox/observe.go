package outbox

import (
	"context"
	"errors"
	"time"

	"github.com/seckillkit/seckill/internal/observe"
)

// Stages reported to [WithObserver]. They are stable (metric labels); a
// rename is a breaking change. Activity and Name are empty (an outbox row
// names no sale).
//
//	stage                         outcome / Value
//	outbox.write                  ok | invalid | duplicate | error; Value =
//	                              messages in the call ([Writer.Write])
//	outbox.send                   published | stored | undelivered |
//	                              invalid | error ([Writer.SendOrStore])
//	outbox.publish                sent | retry | failed | released |
//	                              lease_lost, one event per outcome a
//	                              relay batch had, Value = its rows; or
//	                              error (claim or settle failed, Value =
//	                              rows claimed). An empty poll reports
//	                              nothing.
//	outbox.pending                gauge "ok", Value = PENDING rows
//	outbox.oldest_pending_seconds gauge "ok", Value = age of the oldest
//	                              PENDING row on the relay's clock (0 if
//	                              none)
//	outbox.failed                 gauge "ok", Value = FAILED rows
//
// Operations carry their Duration (a batch: claim, publish and settle;
// each of a batch's events carries the whole batch's Duration, so count
// batches by one outcome, rows by Value). "invalid" is a call refused for
// a bad argument ([ErrInvalidArgument]: a message, a nil tx, database or
// publisher). The three gauges are reported
// together whenever the relay reads them: while [Relay.Run]
// runs, every [WithBacklogInterval]. "error" carries Err.
const (
	StageWrite         = "outbox.write"
	StageSend          = "outbox.send"
	StagePublish       = "outbox.publish"
	StagePending       = "outbox.pending"
	StageOldestPending = "outbox.oldest_pending_seconds"
	StageFailed        = "outbox.failed"
)

func writeOutcome(err error) string {
	switch {
	case err == nil:
		return observe.OK
	case errors.Is(err, ErrInvalidArgument):
		return "invalid"
	case errors.Is(err, ErrDuplicateMsgID):
		return "duplicate"
	}
	return observe.Error
}

func sendOutcome(res SendResult, err error) string {
	switch {
	case res.Delivery == Published:
		return "published"
	case res.Delivery == Stored:
		return "stored"
	case errors.Is(err, ErrUndelivered):
		return "undelivered"
	case errors.Is(err, ErrInvalidArgument):
		return "invalid"
	}
	return observe.Error
}

func (o *options) report(ctx context.Context, e observe.Event, start time.Time) {
	e.Duration = time.Since(start)
	if e.Outcome != observe.Error {
		e.Err = nil
	}
	o.observer.Observe(ctx, e)
}

// observeBatch reports one RunOnce; callers check r.o.observer first. A
// claim or settle cut short because the caller's context ended (Close, a
// cancelled RunOnce) is not a store error and is not reported as one: the
// rows stay due or leased and are taken again.
func (r *Relay) observeBatch(ctx context.Context, start time.Time, b Batch, err error) {
	if err != nil && ctx.Err() != nil {
		return
	}
	if err != nil {
		r.o.report(ctx, observe.Event{Stage: StagePublish, Outcome: observe.Error, Value: float64(b.Claimed), Err: err}, start)
		return
	}
	for _, c := range [...]struct {
		outcome string
		n       int
	}{{"sent", b.Sent}, {"retry", b.Retried}, {"failed", b.Failed}, {"released", b.Released}, {"lease_lost", b.LeaseLost}} {
		if c.n > 0 {
			r.o.report(ctx, observe.Event{Stage: StagePublish, Outcome: c.outcome, Value: float64(c.n)}, start)
		}
	}
}

// observeBacklog reports the three backlog gauges of b, read at now.
func (r *Relay) observeBacklog(ctx context.Context, b Backlog, now time.Time) {
	var age float64
	if b.Pending > 0 && !b.OldestPending.IsZero() {
		age = max(now.Sub(b.OldestPending).Seconds(), 0)
	}
	o := r.o.observer
	o.Observe(ctx, observe.Event{Stage: StagePending, Outcome: observe.OK, Gauge: true, Value: float64(b.Pending)})
	o.Observe(ctx, observe.Event{Stage: StageOldestPending, Outcome: observe.OK, Gauge: true, Value: age})
	o.Observe(ctx, observe.Event{Stage: StageFailed, Outcome: observe.OK, Gauge: true, Value: float64(b.Failed)})
}
