package orderkafka

import (
	"context"
	"fmt"
	"time"
)

// Each constructor takes its own option type, so an option that does not
// apply to it does not compile:
//
//	constructor  option type     options
//	NewProducer  ProducerOption  WithHeaders
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
	headers func(ctx context.Context) map[string]string
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
