package app

import (
	"net/http"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	seckillprom "github.com/seckillkit/seckill/contrib/prometheus"
)

// metrics lives in its own registry: nothing global, two Apps in one process
// (tests, the embedded load generator) never collide.
type metrics struct {
	reg *prometheus.Registry
	// obs is the one observer every library part reports to
	// (contrib/prometheus): seckill_events_total{stage,outcome},
	// seckill_stage_duration_seconds, and a gauge per gauge stage
	// (seckill_breaker_state{name}, seckill_outbox_pending,
	// seckill_outbox_oldest_pending_seconds, seckill_outbox_failed,
	// seckill_order_reconcile_drift, …).
	obs *seckillprom.Observer

	buyOutcomes   *counterVec            // outcome
	buyLatency    prometheus.Histogram   //
	reserve       *counterVec            // status
	limited       *counterVec            // limiter
	refused       *counterVec            // stage
	published     *counterVec            // via: kafka|outbox
	consumed      prometheus.Counter     //
	consumerLag   prometheus.Gauge       //
	inFlight      prometheus.Gauge       //
	outboxBacklog prometheus.Gauge       //
	orders        *prometheus.GaugeVec   // status
	released      *counterVec            // reason
	httpReqs      *prometheus.CounterVec // route, code
	pushClients   prometheus.Gauge       //
	pushed        *counterVec            // result messages pushed, by transport
	workerErrors  *counterVec            // worker
}

func newMetrics() *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	f := func(c prometheus.Collector) { m.reg.MustRegister(c) }
	m.buyOutcomes = newCounterVec(prometheus.CounterOpts{Name: "seckill_buy_outcomes_total", Help: "Buy requests by outcome."}, []string{"outcome"})
	m.buyLatency = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "seckill_buy_duration_seconds", Help: "Buy handler latency.", Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .3, 1}})
	m.reserve = newCounterVec(prometheus.CounterOpts{Name: "seckill_reserve_total", Help: "stock.Reserve outcomes (incl. in-process sold-out short-circuit)."}, []string{"status"})
	m.limited = newCounterVec(prometheus.CounterOpts{Name: "seckill_limiter_refusals_total", Help: "Requests refused by a limiter."}, []string{"limiter"})
	m.refused = newCounterVec(prometheus.CounterOpts{Name: "seckill_refusals_total", Help: "Buy requests refused, by chain stage."}, []string{"stage"})
	m.published = newCounterVec(prometheus.CounterOpts{Name: "seckill_order_messages_total", Help: "Order messages handed off, by path (kafka or outbox)."}, []string{"via"})
	m.consumed = prometheus.NewCounter(prometheus.CounterOpts{Name: "seckill_consumed_total", Help: "Order messages settled by the consumer."})
	m.consumerLag = prometheus.NewGauge(prometheus.GaugeOpts{Name: "seckill_consumer_lag", Help: "Kafka lag of the order consumer group: high-water mark minus committed offset, summed over the topic's partitions."})
	m.inFlight = prometheus.NewGauge(prometheus.GaugeOpts{Name: "seckill_reservations_in_flight", Help: "Reservations held in Redis that have no order yet."})
	m.outboxBacklog = prometheus.NewGauge(prometheus.GaugeOpts{Name: "seckill_outbox_backlog", Help: "Outbox rows still PENDING."})
	m.orders = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "seckill_orders", Help: "Orders in the DB by status."}, []string{"status"})
	m.released = newCounterVec(prometheus.CounterOpts{Name: "seckill_releases_total", Help: "Reservations released back to stock, by reason."}, []string{"reason"})
	m.httpReqs = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "seckill_http_requests_total", Help: "HTTP requests by route and status code."}, []string{"route", "code"})
	m.pushClients = prometheus.NewGauge(prometheus.GaugeOpts{Name: "seckill_push_clients", Help: "Open result streams (SSE and WebSocket)."})
	m.pushed = newCounterVec(prometheus.CounterOpts{Name: "seckill_push_messages_total", Help: "Result messages pushed, by transport (sse, ws)."}, []string{"transport"})
	m.workerErrors = newCounterVec(prometheus.CounterOpts{Name: "seckill_worker_errors_total", Help: "Errors returned by background workers."}, []string{"worker"})
	for _, c := range []prometheus.Collector{m.buyOutcomes.vec, m.buyLatency, m.reserve.vec, m.limited.vec, m.refused.vec, m.published.vec, m.consumed, m.consumerLag, m.inFlight, m.outboxBacklog, m.orders, m.released.vec, m.httpReqs, m.pushClients, m.pushed.vec, m.workerErrors.vec} {
		f(c)
	}
	var err error
	if m.obs, err = seckillprom.New(m.reg); err != nil {
		panic(err) // a fresh registry: only a programming error can clash
	}
	f(collectors.NewGoCollector())
	f(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// counterVec is a one-label CounterVec whose children are cached:
// WithLabelValues on the vector hashes the label and takes a lock on every
// call, several times the cost of a sync.Map hit on the buy path.
type counterVec struct {
	vec      *prometheus.CounterVec
	children sync.Map // label value → prometheus.Counter
}

func newCounterVec(opts prometheus.CounterOpts, labels []string) *counterVec {
	if len(labels) != 1 {
		panic("app: counterVec takes exactly one label")
	}
	return &counterVec{vec: prometheus.NewCounterVec(opts, labels)}
}

// WithLabelValues returns the child counter of value.
func (v *counterVec) WithLabelValues(value string) prometheus.Counter {
	if c, ok := v.children.Load(value); ok {
		return c.(prometheus.Counter)
	}
	c, _ := v.children.LoadOrStore(value, v.vec.WithLabelValues(value))
	return c.(prometheus.Counter)
}
