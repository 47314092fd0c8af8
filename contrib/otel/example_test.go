package seckillotel_test

import (
	"context"
	"fmt"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	seckillotel "github.com/seckillkit/seckill/contrib/otel"
	"github.com/seckillkit/seckill/observe"
)

// The buy handler's trace crosses Kafka: the producer puts it into the
// message headers, the consumer continues it.
func ExampleObserver_Inject() {
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	obs, err := seckillotel.New(seckillotel.WithTracerProvider(tp))
	if err != nil {
		panic(err)
	}

	// Producer: inside the buy request's span.
	ctx, buy := tp.Tracer("api").Start(context.Background(), "POST /api/buy")
	obs.Observe(ctx, observe.Event{Stage: "stock.reserve", Outcome: "ok", Duration: 200 * time.Microsecond})
	headers := obs.Inject(ctx) // → Kafka message headers
	buy.End()

	// Consumer: the headers off the message.
	cctx := obs.Extract(context.Background(), headers)
	obs.Observe(cctx, observe.Event{Stage: "order.consume", Outcome: "ok", Duration: time.Millisecond})

	trace := buy.SpanContext().TraceID()
	for _, s := range spans.Ended() {
		fmt.Println(s.Name(), s.SpanContext().TraceID() == trace)
	}
	// Output:
	// stock.reserve true
	// POST /api/buy true
	// order.consume true
}
