package orderkafka

import (
	"context"
	"fmt"
	"time"

	"github.com/seckillkit/seckill/internal/observe"
	"github.com/seckillkit/seckill/order"
)

// Each constructor takes its own option type, so an option that does not
// apply to it does not compile:
//
//	constructor  option type     options
//	NewProducer  ProducerOption  WithHeaders, WithBatching, WithObserver, WithOnAck
//	NewHandler   HandlerOption   WithLinger
//
// The options of the processing core (batch size, retries, dead-letter
// sink, trace context, …) are the order.Consumer's. Both option types are
// interfaces, built only by the With… functions. A nil option is ignored.
type (
	// ProducerOption configures [NewProducer].
	ProducerOption interface{ applyProducer(*producerOptions) }
	// HandlerOption configures [NewHandler].
	HandlerOption interface{ applyHandler(*handlerOptions) }
)

type producerOption func(*producerOptions)

func (f producerOption) applyProducer(o *producerOptions) { f(o) }

type handlerOption func(*handlerOptions)

func (f handlerOption) applyHandler(o *handlerOptions) { f(o) }

type producerOptions struct {
	headers  func(ctx context.Context) map[string]string
	obs      observe.Observer
	onAck    func(ctx context.Context, m order.Message, partition int32, offset int64)
	batching bool
	linger   time.Duration
	maxBatch int
}

type handlerOptions struct {
	linger time.Duration
	err    error
}

// WithHeaders makes the [Producer] add the headers f returns for the
// publishing context to every record it sends (sarama RecordHeaders, in
// key order): typically a propagator's injection of the trace context
// ("traceparent", "tracestate", "baggage"). The handoff.Submitter passes its
// Submit context to Publish, so the buyer's request trace goes with the
// message; the consumer side makes each message's context from them with
// order.WithContextFrom. A message stored by the fallback instead carries
// no headers (the outbox keeps the message only). f runs on every publish
// and must be fast; a nil or empty map adds nothing. A nil f is ignored.
// Default none.
func WithHeaders(f func(ctx context.Context) map[string]string) ProducerOption {
	return producerOption(func(o *producerOptions) {
		if f != nil {
			o.headers = f
		}
	})
}

// WithBatching makes the [Producer] gather concurrent Publish calls into
// one SyncProducer.SendMessages call each: a batch is sent when it holds
// maxBatch messages or linger after its first message arrived, whichever
// comes first, and [Producer.Close] sends the one still gathering. Every
// caller still waits for its own message's acknowledgement (sarama reports
// an error per message; a message without one was acknowledged), so the
// guarantee of Publish is unchanged: nil only after the broker
// acknowledged that message. A caller whose context ends before its batch
// is sent gets the context's error and its message is never sent; once
// sent, it waits for its answer.
//
// What it saves is the per-call overhead on the Go side (one goroutine
// hand-off and one expectation per SendMessage, and the observer call):
// sarama already packs the messages of concurrent SendMessage calls that
// meet in its queue into one produce request per broker. A lone Publish
// waits the whole linger. See "Batched hand-off" in BENCHMARKS.md for the
// measurement. Zero maxBatch means the default, 256; linger 0 sends what
// gathered until the timer's goroutine runs. A negative linger or a
// maxBatch outside [0, 4096] fails [NewProducer] with [ErrInvalidConfig].
// Default: off (one SendMessage per Publish).
func WithBatching(linger time.Duration, maxBatch int) ProducerOption {
	return producerOption(func(o *producerOptions) {
		o.batching, o.linger, o.maxBatch = true, linger, maxBatch
	})
}

// WithObserver makes the [Producer] report each produce call — one
// SendMessage, or one SendMessages of a batch — as an event of stage
// "orderkafka.produce", outcome "ok" or "error", with the number of
// messages it carried in Value and the call's duration: the count of these
// events over the messages published is the produce calls per message.
// Reported synchronously, after the call. Default none; a nil obs is
// ignored.
func WithObserver(obs observe.Observer) ProducerOption {
	return producerOption(func(o *producerOptions) {
		if obs != nil {
			o.obs = obs
		}
	})
}

// WithLinger sets how long the [Handler] waits for more records before
// handing a batch that is not full (order.WithBatchSize) to the consumer.
// 0 hands over whatever is already buffered. Default 5 ms; a negative
// duration fails [NewHandler] with [ErrInvalidConfig].
func WithLinger(d time.Duration) HandlerOption {
	return handlerOption(func(o *handlerOptions) {
		if d < 0 {
			o.err = fmt.Errorf("%w: negative linger %s", ErrInvalidConfig, d)
			return
		}
		o.linger = d
	})
}

// WithOnAck makes the [Producer] call f with the partition and offset the
// broker acknowledged for m, once per message Publish sends successfully,
// before Publish returns (so synchronously, on the publishing goroutine,
// with Publish's ctx): pass [Positions.Record] (wrapped to log its error),
// so the reconciler knows the message is still on its way however long
// the consumer lags. f is not called for a message not acknowledged. A
// nil f is ignored. Default none.
func WithOnAck(f func(ctx context.Context, m order.Message, partition int32, offset int64)) ProducerOption {
	return producerOption(func(o *producerOptions) {
		if f != nil {
			o.onAck = f
		}
	})
}
