package seckillotel_test

import (
	"context"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace/noop"

	seckillotel "github.com/seckillkit/seckill/contrib/otel"
	"github.com/seckillkit/seckill/observe"
)

func benchObserve(b *testing.B, opts ...seckillotel.Option) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	o, err := seckillotel.New(append([]seckillotel.Option{seckillotel.WithMeterProvider(mp)}, opts...)...)
	if err != nil {
		b.Fatal(err)
	}
	ev := observe.Event{Stage: "stock.reserve", Outcome: "ok", Activity: "a1", Duration: 120 * time.Microsecond}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			o.Observe(ctx, ev)
		}
	})
}

// BenchmarkObserveMetrics: metrics through the SDK, spans to a no-op
// tracer.
func BenchmarkObserveMetrics(b *testing.B) {
	benchObserve(b, seckillotel.WithTracerProvider(noop.NewTracerProvider()))
}

// BenchmarkObserveSampled: metrics and a recorded span per event (always
// sampled, no exporter).
func BenchmarkObserveSampled(b *testing.B) {
	benchObserve(b, seckillotel.WithTracerProvider(sdktrace.NewTracerProvider()))
}
