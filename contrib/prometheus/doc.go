// Package seckillprom is the Prometheus adapter of the seckill observer: one
// [Observer] that every seckill package can report to (they all accept the
// one observer shape, [observe.Observer] from
// github.com/seckillkit/seckill/observe), turning events into
// client_golang metrics.
//
// It lives in its own module so the core library does not depend on
// client_golang.
//
// Metrics (names are stable; a dashboard and alert rules that use them ship
// in examples/fullstack/deploy/observability):
//
//	seckill_events_total{stage,outcome}              counter, one per operation event
//	seckill_stage_duration_seconds{stage,outcome}    histogram of Event.Duration (buckets 50µs–1s by default)
//	seckill_<stage with '.'→'_'>{name}               gauge, one per gauge stage (seckill_breaker_state,
//	                                                 seckill_order_consumer_lag, seckill_outbox_failed, ...)
//	seckill_observer_dropped_total{reason}           events this observer refused
//
// The activity label is added to all of them (except the dropped counter)
// only with [WithActivityLabel]: a sale ID per label value multiplies the
// series. Gauge events without that option overwrite one another when only
// their activity differs.
//
// Bounded cardinality: at most [WithMaxStages] distinct stage names (64 by
// default) get series; an event of a new stage past the cap is dropped and
// counted with reason "stage_limit". An event whose stage or outcome is not a
// lower-case name ("stock.reserve", "sold_out"), or whose activity or name is
// not valid UTF-8, is dropped with reason "invalid". A gauge whose metric
// cannot be registered (its name is taken by another collector on the
// registerer) is dropped with reason "register". Observe never panics.
//
// An [Observer] is safe for concurrent use. Observe takes no lock on the hot
// path other than read locks, and does not allocate once a (stage, outcome)
// pair has been seen.
package seckillprom
