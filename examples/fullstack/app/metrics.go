package app

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics lives in its own registry: nothing global, two Apps in one process
// (tests, the embedded load generator) never collide.
type metrics struct {
	reg *prometheus.Registry

	buyOutcomes   *prometheus.CounterVec // outcome
	buyLatency    prometheus.Histogram   //
	reserve       *prometheus.CounterVec // status
	limited       *prometheus.CounterVec // limiter
	refused       *prometheus.CounterVec // stage
	breakerState  *prometheus.GaugeVec   // name → 0 closed, 1 half-open, 2 open
	published     *prometheus.CounterVec // via: kafka|outbox
	consumed      prometheus.Counter     //
	consumerLag   prometheus.Gauge       //
	outboxBacklog prometheus.Gauge       //
	orders        *prometheus.GaugeVec   // status
	released      *prometheus.CounterVec // reason
	httpReqs      *prometheus.CounterVec // route, code
	pushClients   prometheus.Gauge       //
	workerErrors  *prometheus.CounterVec // worker
}

func newMetrics() *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	f := func(c prometheus.Collector) { m.reg.MustRegister(c) }
	m.buyOutcomes = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "seckill_buy_outcomes_total", Help: "Buy requests by outcome."}, []string{"outcome"})
	m.buyLatency = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "seckill_buy_duration_seconds", Help: "Buy handler latency.", Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .3, 1}})
	m.reserve = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "seckill_reserve_total", Help: "stock.Reserve outcomes (incl. in-process sold-out short-circuit)."}, []string{"status"})
	m.limited = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "seckill_limiter_refusals_total", Help: "Requests refused by a limiter."}, []string{"limiter"})
	m.refused = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "seckill_refusals_total", Help: "Buy requests refused, by chain stage."}, []string{"stage"})
	m.breakerState = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "seckill_breaker_state", Help: "Circuit breaker state: 0 closed, 1 half-open, 2 open."}, []string{"name"})
	m.published = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "seckill_order_messages_total", Help: "Order messages handed off, by path (kafka or outbox)."}, []string{"via"})
	m.consumed = prometheus.NewCounter(prometheus.CounterOpts{Name: "seckill_consumed_total", Help: "Order messages settled by the consumer."})
	m.consumerLag = prometheus.NewGauge(prometheus.GaugeOpts{Name: "seckill_consumer_lag", Help: "Order messages accepted but not yet settled in the DB (this node's view)."})
	m.outboxBacklog = prometheus.NewGauge(prometheus.GaugeOpts{Name: "seckill_outbox_backlog", Help: "Outbox rows still PENDING."})
	m.orders = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "seckill_orders", Help: "Orders in the DB by status."}, []string{"status"})
	m.released = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "seckill_releases_total", Help: "Reservations released back to stock, by reason."}, []string{"reason"})
	m.httpReqs = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "seckill_http_requests_total", Help: "HTTP requests by route and status code."}, []string{"route", "code"})
	m.pushClients = prometheus.NewGauge(prometheus.GaugeOpts{Name: "seckill_push_clients", Help: "Open SSE result streams."})
	m.workerErrors = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "seckill_worker_errors_total", Help: "Errors returned by background workers."}, []string{"worker"})
	for _, c := range []prometheus.Collector{m.buyOutcomes, m.buyLatency, m.reserve, m.limited, m.refused, m.breakerState, m.published, m.consumed, m.consumerLag, m.outboxBacklog, m.orders, m.released, m.httpReqs, m.pushClients, m.workerErrors} {
		f(c)
	}
	f(collectors.NewGoCollector())
	f(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}
