package order

import (
	"context"
	"time"

	"github.com/seckillkit/seckill/internal/observe"
)

// Stages and outcomes reported to [WithObserver] (order.consumer_lag by
// orderkafka.ObserveLag). They are stable (metric
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
//	order.consumer_lag     gauge "ok", Value = the group's Kafka lag in
//	                       messages, Name = the group (orderkafka.ObserveLag); error
//	                       when it could not be read (not a gauge)
//
// Operations carry their Duration; the events of one consumer
// transaction carry its whole Duration (count transactions by one
// outcome, orders by Value). The observer gets the operation's context:
// for order.consume the batch's context, which with [WithContextFrom] is
// the one made from the batch's first message (see [WithContextFrom]).
const (
	StageConsume     = "order.consume"
	StageConsumerLag = "order.consumer_lag"
)

// WithObserver reports the operations of the [Consumer] to o (see the
// stages above; order/handoff, order/status and order/reconcile report
// their own). The observer is called synchronously, after the
// operation, outside any lock or transaction. Default none (and no cost:
// a nil observer is never called); a nil o is ignored.
func WithObserver(o observe.Observer) ConsumerOption {
	return consumerOption(func(opts *options) {
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
