package order

import (
	"context"
	"slices"

	"github.com/IBM/sarama"
)

// Trace context across Kafka: the [Producer] writes headers made from the
// publishing context ([WithHeaders]) into every record, and the
// [Consumer] makes each message's context from its headers
// ([WithContextFrom]). With OpenTelemetry, the two functions are a
// propagation.TextMapPropagator's Inject and Extract over a
// propagation.MapCarrier; the package itself depends on no tracer.

// WithHeaders makes the [Producer] add the headers f returns for the
// publishing context to every record it sends (sarama RecordHeaders, in
// key order): typically a propagator's injection of the trace context
// ("traceparent", "tracestate", "baggage"). The [Submitter] passes its
// Submit context to Publish, so the buyer's request trace goes with the
// message. A message stored by the [Fallback] instead carries no headers
// (the outbox keeps the message only). f runs on every publish and must
// be fast; a nil or empty map adds nothing. Default none.
func WithHeaders(f func(ctx context.Context) map[string]string) Option {
	return optionFunc(func(o *options) {
		if f != nil {
			o.headers = f
		}
	})
}

// WithContextFrom makes the [Consumer] derive each message's context from
// the consumer's context and the message's Kafka headers (nil when it has
// none): typically a propagator's extraction of the producer's trace
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
func WithContextFrom(f func(ctx context.Context, headers map[string]string) context.Context) Option {
	return optionFunc(func(o *options) {
		if f != nil {
			o.contextFrom = f
		}
	})
}

// msgContext is m's context: [WithContextFrom] applied to its headers.
func (c *Consumer) msgContext(ctx context.Context, m Message) context.Context {
	if c.o.contextFrom == nil {
		return ctx
	}
	if mctx := c.o.contextFrom(ctx, m.Headers); mctx != nil {
		return mctx
	}
	return ctx
}

// recordHeaders turns a header map into sarama record headers, in key
// order (records are compared and logged byte for byte).
func recordHeaders(h map[string]string) []sarama.RecordHeader {
	if len(h) == 0 {
		return nil
	}
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]sarama.RecordHeader, len(keys))
	for i, k := range keys {
		out[i] = sarama.RecordHeader{Key: []byte(k), Value: []byte(h[k])}
	}
	return out
}

// headersOf turns record headers into a map; of a repeated key the last
// value wins.
func headersOf(hs []*sarama.RecordHeader) map[string]string {
	m := make(map[string]string, len(hs))
	for _, h := range hs {
		if h != nil {
			m[string(h.Key)] = string(h.Value)
		}
	}
	return m
}
