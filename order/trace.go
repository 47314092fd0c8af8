package order

import "context"

// Trace context across Kafka: orderkafka.Producer writes headers made from
// the publishing context (orderkafka.WithHeaders) into every record, and
// the [Consumer] makes each message's context from its headers
// ([WithContextFrom]). With OpenTelemetry, the two functions are a
// propagation.TextMapPropagator's Inject and Extract over a
// propagation.MapCarrier; the package itself depends on no tracer.

// WithContextFrom makes the [Consumer] derive each message's context from
// the consumer's context and the headers of the message's [Record] (nil
// when it has none): typically a propagator's extraction of the producer's trace
// context. f must return ctx or a context derived from it (its
// cancellation is the session's); nil means ctx.
//
// Which context each call gets: a message written on its own (the
// one-by-one path, [WithBatchSize](1), a batch of one) is processed, its
// [TxHook] run, its post-commit work done and its observer events
// reported with its own context. A batch of several messages is written
// in ONE transaction, so the [TxHook], the post-commit work and the
// batch's observer events get the context of the batch's FIRST message;
// the [Order.Headers] of each order the hook gets are its own message's
// headers, to link or start per-order spans from. Default none (every
// call gets the consumer's context).
func WithContextFrom(f func(ctx context.Context, headers map[string]string) context.Context) ConsumerOption {
	return consumerOption(func(o *options) {
		if f != nil {
			o.contextFrom = f
		}
	})
}
