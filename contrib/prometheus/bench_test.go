package seckillprom_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	seckillprom "github.com/seckillkit/seckill/contrib/prometheus"
	"github.com/seckillkit/seckill/observe"
)

func benchObserver(b *testing.B, opts ...seckillprom.Option) *seckillprom.Observer {
	b.Helper()
	o, err := seckillprom.New(prometheus.NewRegistry(), opts...)
	if err != nil {
		b.Fatal(err)
	}
	return o
}

// BenchmarkObserve is the hot path: a seen (stage, outcome), from every
// core at once.
func BenchmarkObserve(b *testing.B) {
	o := benchObserver(b)
	ev := observe.Event{Stage: "stock.reserve", Outcome: "ok", Activity: "a1", Duration: 120 * time.Microsecond}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			o.Observe(ctx, ev)
		}
	})
}

// BenchmarkObserveActivity adds the activity label.
func BenchmarkObserveActivity(b *testing.B) {
	o := benchObserver(b, seckillprom.WithActivityLabel())
	ev := observe.Event{Stage: "stock.reserve", Outcome: "ok", Activity: "a1", Duration: 120 * time.Microsecond}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			o.Observe(ctx, ev)
		}
	})
}

// BenchmarkObserveGauge is a gauge reading of a seen series.
func BenchmarkObserveGauge(b *testing.B) {
	o := benchObserver(b)
	ev := observe.Event{Stage: "breaker.state", Name: "redis", Gauge: true, Value: 2}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			o.Observe(ctx, ev)
		}
	})
}

// BenchmarkVecWithLabelValues is the baseline the cache of children beats:
// the same counter and histogram through the vectors' own lookup.
func BenchmarkVecWithLabelValues(b *testing.B) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "c", Help: "c"}, []string{"stage", "outcome"})
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "h", Help: "h", Buckets: seckillprom.DefaultBuckets}, []string{"stage", "outcome"})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			c.WithLabelValues("stock.reserve", "ok").Inc()
			h.WithLabelValues("stock.reserve", "ok").Observe(.00012)
		}
	})
}
