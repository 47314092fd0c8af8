package app_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	seckillotel "github.com/seckillkit/seckill/contrib/otel"
	"github.com/seckillkit/seckill/examples/fullstack/app"
)

// TestTraceCrossesKafka: with contrib/otel plugged in (Config.Observer and
// Config.Trace), one buy is one trace, from the HTTP request through the
// library's steps (stock.reserve …) and, in the message's Kafka headers,
// into the consumer's transaction (order.consume).
func TestTraceCrossesKafka(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	obs, err := seckillotel.New(seckillotel.WithTracerProvider(tp))
	if err != nil {
		t.Fatal(err)
	}
	tracer := tp.Tracer("fullstack-test")
	cfg := embeddedConfig(10, 2)
	cfg.Observer = obs
	cfg.Trace = app.Tracing{
		Start: func(ctx context.Context, name string) (context.Context, func()) {
			ctx, sp := tracer.Start(ctx, "http "+name)
			return ctx, func() { sp.End() }
		},
		Inject:  obs.Inject,
		Extract: obs.Extract,
	}
	_, base := startApp(t, cfg)
	u := login(t, base, "user1")
	cid, ans, tok, path := u.creds()
	if code, m := u.do("POST", path, map[string]string{"token": tok, "captcha_id": cid, "captcha": ans}); code != http.StatusAccepted {
		t.Fatalf("buy: %d %v", code, m)
	}

	find := func(name string) []sdktrace.ReadOnlySpan {
		var out []sdktrace.ReadOnlySpan
		for _, s := range rec.Ended() {
			if s.Name() == name {
				out = append(out, s)
			}
		}
		return out
	}
	deadline := time.Now().Add(drainBound)
	for len(find("order.consume")) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no order.consume span after %v", drainBound)
		}
		time.Sleep(20 * time.Millisecond) // polling the recorder, a bound above
	}
	buys := find("http buy")
	if len(buys) != 1 {
		t.Fatalf("%d http buy spans, want 1", len(buys))
	}
	trace := buys[0].SpanContext().TraceID()
	consumed := false
	for _, s := range find("order.consume") {
		consumed = consumed || s.SpanContext().TraceID() == trace
	}
	if !consumed {
		t.Errorf("no order.consume span in the buy's trace %s: the trace did not cross Kafka", trace)
	}
	for _, stage := range []string{"stock.reserve", "order.submit", "token.consume", "captcha.verify"} {
		in := false
		for _, s := range find(stage) {
			in = in || (s.SpanContext().TraceID() == trace && s.Parent().SpanID() == buys[0].SpanContext().SpanID())
		}
		if !in {
			t.Errorf("no %s span under the buy's span", stage)
		}
	}
}

// TestMetricsFromTheObserver: every library part reports to the service's
// one Prometheus observer: after a buy, /metrics counts the library's
// stages (stock.reserve, token.consume, captcha.verify, order.submit,
// limiter.allow, orderkafka.produce) and shows the breakers' state gauge;
// with -produce-batch too (the buy's message goes in a batch of one, sent
// after the linger).
func TestMetricsFromTheObserver(t *testing.T) {
	t.Run("produce-batch=0", func(t *testing.T) { testMetricsFromTheObserver(t, 0) })
	t.Run("produce-batch=8", func(t *testing.T) { testMetricsFromTheObserver(t, 8) })
}

func testMetricsFromTheObserver(t *testing.T, produceBatch int) {
	cfg := embeddedConfig(10, 2)
	cfg.ProduceBatch = produceBatch
	_, base := startApp(t, cfg)
	u := login(t, base, "user1")
	cid, ans, tok, path := u.creds()
	if code, m := u.do("POST", path, map[string]string{"token": tok, "captcha_id": cid, "captcha": ans}); code != http.StatusAccepted {
		t.Fatalf("buy: %d %v", code, m)
	}
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, want := range []string{
		`seckill_events_total{outcome="reserved",stage="stock.reserve"} 1`,
		`seckill_events_total{outcome="ok",stage="token.consume"} 1`,
		`seckill_events_total{outcome="ok",stage="captcha.verify"} 1`,
		`seckill_events_total{outcome="kafka",stage="order.submit"} 1`,
		`seckill_events_total{outcome="ok",stage="orderkafka.produce"} 1`,
		`stage="limiter.allow"`,
		`seckill_breaker_state{name="redis"} 0`,
		`seckill_breaker_state{name="kafka"} 0`,
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("/metrics has no %s", want)
		}
	}
}
