// Package seckillotel is the OpenTelemetry adapter of the seckill observer:
// one [Observer] that every seckill package can report to (they all accept
// the one observer shape, [observe.Observer] from
// github.com/seckillkit/seckill/observe). It records metrics through
// a MeterProvider and a span per operation through a TracerProvider, and
// carries a trace across Kafka in message headers ([Observer.Inject],
// [Observer.Extract]).
//
// It lives in its own module so the core library does not depend on
// OpenTelemetry.
//
// Metrics (instrumentation scope "github.com/seckillkit/seckill/contrib/otel"):
//
//	seckill.events              Int64Counter, attributes stage, outcome
//	seckill.stage.duration      Float64Histogram, unit "s", attributes stage, outcome (bounds 50µs–1s)
//	seckill.<stage>             Float64Gauge per gauge stage, attribute name (seckill.breaker.state, ...)
//	seckill.observer.dropped    Int64Counter, attribute reason: stage_limit, invalid, register
//
// An exporter to Prometheus that turns dots into underscores and adds the
// "_total" and unit suffixes yields the names of the Prometheus adapter
// (seckill_events_total, seckill_stage_duration_seconds,
// seckill_breaker_state), so one dashboard serves both. The activity
// attribute is added to the metrics only with [WithActivityAttribute]; the
// stage cap ([WithMaxStages], 64 by default) and the validation of stage and
// outcome names are those of the Prometheus adapter.
//
// Spans: every operation event (Gauge false) of a valid stage becomes a span
// named by its Stage, of kind internal, started at now − Duration and ended
// at now, a child of the span in the context given to Observe (packages call
// the observer with the caller's context). Attributes: seckill.outcome, and
// seckill.activity / seckill.name when not empty. Outcome "error" sets the
// span status to Error (described by Event.Err when set, which is also
// recorded as an exception event). The stage cap does not apply to spans.
//
// An [Observer] is safe for concurrent use.
package seckillotel
