package seckillotel_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	seckillotel "github.com/seckillkit/seckill/contrib/otel"
	"github.com/seckillkit/seckill/observe"
)

// rig is an Observer wired to an in-memory span recorder and a manual
// metric reader, with a clock that stands still at now.
type rig struct {
	obs    *seckillotel.Observer
	reader *sdkmetric.ManualReader
	spans  *tracetest.SpanRecorder
	tp     *sdktrace.TracerProvider
	now    time.Time
}

func newRig(t *testing.T, opts ...seckillotel.Option) *rig {
	t.Helper()
	r := &rig{
		reader: sdkmetric.NewManualReader(),
		spans:  tracetest.NewSpanRecorder(),
		// Span times are data here, never a deadline: any fixed instant
		// does; the wall clock at the start of the test is one.
		now: time.Now().Truncate(time.Second),
	}
	r.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(r.spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r.reader))
	t.Cleanup(func() {
		_ = r.tp.Shutdown(context.Background())
		_ = mp.Shutdown(context.Background())
	})
	base := []seckillotel.Option{
		seckillotel.WithMeterProvider(mp),
		seckillotel.WithTracerProvider(r.tp),
		seckillotel.WithClock(func() time.Time { return r.now }),
	}
	obs, err := seckillotel.New(append(base, opts...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	r.obs = obs
	return r
}

// metric returns the collected metric called name, and whether it exists.
func (r *rig) metric(t *testing.T, name string) (metricdata.Metrics, bool) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != seckillotel.ScopeName {
			t.Fatalf("scope %q, want %q", sm.Scope.Name, seckillotel.ScopeName)
		}
		for _, m := range sm.Metrics {
			if m.Name == name {
				return m, true
			}
		}
	}
	return metricdata.Metrics{}, false
}

func (r *rig) mustMetric(t *testing.T, name string) metricdata.Metrics {
	t.Helper()
	m, ok := r.metric(t, name)
	if !ok {
		t.Fatalf("no metric %s", name)
	}
	return m
}

func set(kv ...attribute.KeyValue) attribute.Set { return attribute.NewSet(kv...) }

func so(stage, outcome string) attribute.Set {
	return set(attribute.String("stage", stage), attribute.String("outcome", outcome))
}

func dropped(invalid, register, limit int64) metricdata.Metrics {
	var dps []metricdata.DataPoint[int64]
	for _, p := range []struct {
		r string
		n int64
	}{{"invalid", invalid}, {"register", register}, {"stage_limit", limit}} {
		if p.n > 0 {
			dps = append(dps, metricdata.DataPoint[int64]{Attributes: set(attribute.String("reason", p.r)), Value: p.n})
		}
	}
	return metricdata.Metrics{
		Name:        seckillotel.DroppedName,
		Description: "Events the seckill OpenTelemetry observer refused: stage_limit (too many stage names), invalid (bad stage, outcome or attribute value), register (gauge instrument refused).",
		Unit:        "{event}",
		Data:        metricdata.Sum[int64]{Temporality: metricdata.CumulativeTemporality, IsMonotonic: true, DataPoints: dps},
	}
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ctx := context.Background()
	for _, d := range []time.Duration{40 * time.Microsecond, 300 * time.Microsecond, 2 * time.Second} {
		r.obs.Observe(ctx, observe.Event{Stage: "stock.reserve", Outcome: "ok", Activity: "a1", Duration: d})
	}
	r.obs.Observe(ctx, observe.Event{Stage: "stock.reserve", Outcome: "sold_out", Duration: 3 * time.Millisecond})
	r.obs.Observe(ctx, observe.Event{Stage: "breaker.state", Name: "redis", Gauge: true, Value: 1})
	r.obs.Observe(ctx, observe.Event{Stage: "breaker.state", Name: "redis", Gauge: true, Value: 2})
	r.obs.Observe(ctx, observe.Event{Stage: "breaker.state", Name: "db", Gauge: true, Value: 0})
	r.obs.Observe(ctx, observe.Event{Stage: "order.consumer_lag", Gauge: true, Value: 1234})

	metricdatatest.AssertEqual(t, metricdata.Metrics{
		Name:        seckillotel.EventsName,
		Description: "Operations reported by seckill packages, by stage and outcome.",
		Unit:        "{event}",
		Data: metricdata.Sum[int64]{
			Temporality: metricdata.CumulativeTemporality,
			IsMonotonic: true,
			DataPoints: []metricdata.DataPoint[int64]{
				{Attributes: so("stock.reserve", "ok"), Value: 3},
				{Attributes: so("stock.reserve", "sold_out"), Value: 1},
			},
		},
	}, r.mustMetric(t, seckillotel.EventsName), metricdatatest.IgnoreTimestamp())

	bounds := seckillotel.DefaultBuckets
	okCounts := make([]uint64, len(bounds)+1)
	soldCounts := make([]uint64, len(bounds)+1)
	for i, b := range bounds { // cumulative → per bucket, by hand
		switch b {
		case .00005:
			okCounts[i] = 1 // 40µs
		case .0005:
			okCounts[i] = 1 // 300µs
		case .005:
			soldCounts[i] = 1 // 3ms
		}
	}
	okCounts[len(bounds)] = 1 // 2s
	metricdatatest.AssertEqual(t, metricdata.Metrics{
		Name:        seckillotel.DurationName,
		Description: "Duration of operations reported by seckill packages, by stage and outcome.",
		Unit:        "s",
		Data: metricdata.Histogram[float64]{
			Temporality: metricdata.CumulativeTemporality,
			DataPoints: []metricdata.HistogramDataPoint[float64]{
				{Attributes: so("stock.reserve", "ok"), Count: 3, Bounds: bounds, BucketCounts: okCounts,
					Min: metricdata.NewExtrema(0.00004), Max: metricdata.NewExtrema(2.0), Sum: 0.00004 + 0.0003 + 2},
				{Attributes: so("stock.reserve", "sold_out"), Count: 1, Bounds: bounds, BucketCounts: soldCounts,
					Min: metricdata.NewExtrema(0.003), Max: metricdata.NewExtrema(0.003), Sum: 0.003},
			},
		},
	}, r.mustMetric(t, seckillotel.DurationName), metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars())

	metricdatatest.AssertEqual(t, metricdata.Metrics{
		Name:        "seckill.breaker.state",
		Description: "Level reported by seckill stage breaker.state.",
		Data: metricdata.Gauge[float64]{DataPoints: []metricdata.DataPoint[float64]{
			{Attributes: set(attribute.String("name", "redis")), Value: 2},
			{Attributes: set(attribute.String("name", "db")), Value: 0},
		}},
	}, r.mustMetric(t, "seckill.breaker.state"), metricdatatest.IgnoreTimestamp())
	metricdatatest.AssertEqual(t, metricdata.Metrics{
		Name:        "seckill.order.consumer_lag",
		Description: "Level reported by seckill stage order.consumer_lag.",
		Data: metricdata.Gauge[float64]{DataPoints: []metricdata.DataPoint[float64]{
			{Attributes: set(attribute.String("name", "")), Value: 1234},
		}},
	}, r.mustMetric(t, "seckill.order.consumer_lag"), metricdatatest.IgnoreTimestamp())
	if m, ok := r.metric(t, seckillotel.DroppedName); ok {
		t.Fatalf("dropped reported without drops: %+v", m)
	}
	// Four operations, four spans; gauge readings make none.
	if n := len(r.spans.Ended()); n != 4 {
		t.Fatalf("spans: %d, want 4", n)
	}
}

func TestActivityAttribute(t *testing.T) {
	t.Parallel()
	r := newRig(t, seckillotel.WithActivityAttribute(), nil)
	ctx := context.Background()
	r.obs.Observe(ctx, observe.Event{Stage: "stock.reserve", Outcome: "ok", Activity: "a1"})
	r.obs.Observe(ctx, observe.Event{Stage: "stock.reserve", Outcome: "ok", Activity: "a1"})
	r.obs.Observe(ctx, observe.Event{Stage: "stock.reserve", Outcome: "ok", Activity: "a2"})
	r.obs.Observe(ctx, observe.Event{Stage: "order.reconcile_drift", Activity: "a1", Gauge: true, Value: -2})
	act := func(a string) attribute.KeyValue { return attribute.String("activity", a) }
	metricdatatest.AssertEqual(t, metricdata.Sum[int64]{
		Temporality: metricdata.CumulativeTemporality,
		IsMonotonic: true,
		DataPoints: []metricdata.DataPoint[int64]{
			{Attributes: set(attribute.String("stage", "stock.reserve"), attribute.String("outcome", "ok"), act("a1")), Value: 2},
			{Attributes: set(attribute.String("stage", "stock.reserve"), attribute.String("outcome", "ok"), act("a2")), Value: 1},
		},
	}, r.mustMetric(t, seckillotel.EventsName).Data.(metricdata.Sum[int64]), metricdatatest.IgnoreTimestamp())
	metricdatatest.AssertEqual(t, metricdata.Gauge[float64]{DataPoints: []metricdata.DataPoint[float64]{
		{Attributes: set(attribute.String("name", ""), act("a1")), Value: -2},
	}}, r.mustMetric(t, "seckill.order.reconcile_drift").Data.(metricdata.Gauge[float64]), metricdatatest.IgnoreTimestamp())
}

func TestSpans(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ctx, parent := r.tp.Tracer("test").Start(context.Background(), "POST /api/buy")
	boom := errors.New("redis: connection refused")
	r.obs.Observe(ctx, observe.Event{Stage: "limiter.allow", Outcome: "ok", Activity: "a1", Name: "per_user", Duration: 80 * time.Microsecond})
	r.obs.Observe(ctx, observe.Event{Stage: "stock.reserve", Outcome: "error", Activity: "a1", Duration: 2 * time.Millisecond, Err: boom})
	r.obs.Observe(ctx, observe.Event{Stage: "breaker.call", Outcome: "error", Name: "redis"})
	r.obs.Observe(ctx, observe.Event{Stage: "outbox.relay", Outcome: "ok", Value: 12})
	r.obs.Observe(ctx, observe.Event{Stage: "breaker.state", Name: "redis", Gauge: true, Value: 2})
	parent.End()

	ended := r.spans.Ended()
	if len(ended) != 5 {
		t.Fatalf("ended spans: %d, want 5: 4 from the observer and the parent", len(ended))
	}
	byName := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range ended {
		byName[s.Name()] = s
	}
	if _, ok := byName["breaker.state"]; ok {
		t.Fatal("a gauge reading made a span")
	}
	psc := parent.SpanContext()
	want := []struct {
		name   string
		dur    time.Duration
		attrs  []attribute.KeyValue
		status sdktrace.Status
		events int
	}{
		{"limiter.allow", 80 * time.Microsecond, []attribute.KeyValue{seckillotel.AttrOutcome.String("ok"), seckillotel.AttrActivity.String("a1"), seckillotel.AttrName.String("per_user")}, sdktrace.Status{Code: codes.Unset}, 0},
		{"stock.reserve", 2 * time.Millisecond, []attribute.KeyValue{seckillotel.AttrOutcome.String("error"), seckillotel.AttrActivity.String("a1")}, sdktrace.Status{Code: codes.Error, Description: boom.Error()}, 1},
		{"breaker.call", 0, []attribute.KeyValue{seckillotel.AttrOutcome.String("error"), seckillotel.AttrName.String("redis")}, sdktrace.Status{Code: codes.Error, Description: "error"}, 0},
		{"outbox.relay", 0, []attribute.KeyValue{seckillotel.AttrOutcome.String("ok"), seckillotel.AttrValue.Float64(12)}, sdktrace.Status{Code: codes.Unset}, 0},
	}
	for _, w := range want {
		s, ok := byName[w.name]
		if !ok {
			t.Errorf("no span %s", w.name)
			continue
		}
		if s.Parent().SpanID() != psc.SpanID() || s.SpanContext().TraceID() != psc.TraceID() {
			t.Errorf("%s: parent %v trace %v, want %v in %v", w.name, s.Parent().SpanID(), s.SpanContext().TraceID(), psc.SpanID(), psc.TraceID())
		}
		if !s.StartTime().Equal(r.now.Add(-w.dur)) || !s.EndTime().Equal(r.now) {
			t.Errorf("%s: %v – %v, want %v – %v", w.name, s.StartTime(), s.EndTime(), r.now.Add(-w.dur), r.now)
		}
		if s.SpanKind() != trace.SpanKindInternal {
			t.Errorf("%s: kind %v", w.name, s.SpanKind())
		}
		if got, wantSet := attribute.NewSet(s.Attributes()...), attribute.NewSet(w.attrs...); !got.Equals(&wantSet) {
			t.Errorf("%s: attributes %v, want %v", w.name, got.ToSlice(), w.attrs)
		}
		if s.Status() != w.status {
			t.Errorf("%s: status %+v, want %+v", w.name, s.Status(), w.status)
		}
		if len(s.Events()) != w.events {
			t.Errorf("%s: %d events, want %d", w.name, len(s.Events()), w.events)
		}
		if s.InstrumentationScope().Name != seckillotel.ScopeName {
			t.Errorf("%s: scope %q", w.name, s.InstrumentationScope().Name)
		}
	}
	if ev := byName["stock.reserve"].Events(); len(ev) == 1 && (ev[0].Name != "exception" || !ev[0].Time.Equal(r.now)) {
		t.Errorf("error event %q at %v, want exception at %v", ev[0].Name, ev[0].Time, r.now)
	}

	// Without a span in ctx the operation starts a trace of its own.
	r.spans.Reset()
	r.obs.Observe(context.Background(), observe.Event{Stage: "stock.reserve", Outcome: "ok"})
	s := r.spans.Ended()
	if len(s) != 1 {
		t.Fatalf("spans: %d, want 1", len(s))
	}
	if s[0].Parent().IsValid() || s[0].SpanContext().TraceID() == psc.TraceID() {
		t.Fatalf("root span: parent %v, trace %v (the earlier trace: %v)", s[0].Parent(), s[0].SpanContext().TraceID(), psc.TraceID())
	}
}

// TestKafkaRoundTrip is the trace across Kafka: the producer injects the
// buy's trace into the message headers, the consumer extracts it and its
// transaction's span continues that trace.
func TestKafkaRoundTrip(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	buyCtx, buy := r.tp.Tracer("test").Start(context.Background(), "POST /api/buy")
	headers := r.obs.Inject(buyCtx)
	buy.End()
	sc := buy.SpanContext()
	want := fmt.Sprintf("00-%s-%s-01", sc.TraceID(), sc.SpanID())
	if len(headers) != 1 || headers["traceparent"] != want {
		t.Fatalf("headers %v, want traceparent %s", headers, want)
	}

	// The consumer side: a fresh context, the headers off the message.
	consumeCtx := r.obs.Extract(context.Background(), headers)
	remote := trace.SpanContextFromContext(consumeCtx)
	if !remote.IsRemote() || remote.TraceID() != sc.TraceID() || remote.SpanID() != sc.SpanID() {
		t.Fatalf("extracted %+v, want the buy's span %v/%v, remote", remote, sc.TraceID(), sc.SpanID())
	}
	r.obs.Observe(consumeCtx, observe.Event{Stage: "order.consume", Outcome: "ok", Activity: "a1", Duration: time.Millisecond})
	var consume sdktrace.ReadOnlySpan
	for _, s := range r.spans.Ended() {
		if s.Name() == "order.consume" {
			consume = s
		}
	}
	if consume == nil {
		t.Fatal("no order.consume span")
	}
	if consume.SpanContext().TraceID() != sc.TraceID() || consume.Parent().SpanID() != sc.SpanID() || !consume.Parent().IsRemote() {
		t.Fatalf("consume span in trace %v under %v (remote %v), want trace %v under %v",
			consume.SpanContext().TraceID(), consume.Parent().SpanID(), consume.Parent().IsRemote(), sc.TraceID(), sc.SpanID())
	}

	// No span, no headers; no headers, no parent.
	if h := r.obs.Inject(context.Background()); len(h) != 0 {
		t.Fatalf("headers without a span: %v", h)
	}
	for _, h := range []map[string]string{nil, {}, {"traceparent": "garbage"}} {
		if sc := trace.SpanContextFromContext(r.obs.Extract(context.Background(), h)); sc.IsValid() {
			t.Fatalf("extracted %+v from %v", sc, h)
		}
	}
}

func TestPropagatorOption(t *testing.T) {
	t.Parallel()
	prop := propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	r := newRig(t, seckillotel.WithPropagator(prop))
	ctx, sp := r.tp.Tracer("test").Start(context.Background(), "buy")
	defer sp.End()
	h := r.obs.Inject(ctx)
	if _, ok := h["traceparent"]; !ok || len(h) != 1 {
		t.Fatalf("headers %v: want traceparent only (no baggage set)", h)
	}
	// Baggage-only: the trace is not carried.
	r2 := newRig(t, seckillotel.WithPropagator(propagation.Baggage{}))
	if h := r2.obs.Inject(ctx); len(h) != 0 {
		t.Fatalf("baggage propagator wrote %v", h)
	}
}

func TestCapAndInvalid(t *testing.T) {
	t.Parallel()
	r := newRig(t, seckillotel.WithMaxStages(2))
	ctx := context.Background()
	r.obs.Observe(ctx, observe.Event{Stage: "stock.reserve", Outcome: "ok"})
	r.obs.Observe(ctx, observe.Event{Stage: "breaker.state", Name: "redis", Gauge: true, Value: 2})
	r.obs.Observe(ctx, observe.Event{Stage: "limiter.allow", Outcome: "ok"})             // past the cap
	r.obs.Observe(ctx, observe.Event{Stage: "outbox.pending", Gauge: true, Value: 3})    // past the cap
	r.obs.Observe(ctx, observe.Event{Stage: "Stock.Reserve", Outcome: "ok"})             // invalid stage
	r.obs.Observe(ctx, observe.Event{Stage: "", Gauge: true})                            // invalid stage
	r.obs.Observe(ctx, observe.Event{Stage: "stock.reserve", Outcome: "Sold Out"})       // invalid outcome
	r.obs.Observe(ctx, observe.Event{Stage: "breaker.state", Name: "\xff", Gauge: true}) // invalid name
	r.obs.Observe(ctx, observe.Event{Stage: "stock.reserve", Outcome: "ok"})

	metricdatatest.AssertEqual(t, dropped(4, 0, 2), r.mustMetric(t, seckillotel.DroppedName), metricdatatest.IgnoreTimestamp())
	metricdatatest.AssertEqual(t, metricdata.Sum[int64]{
		Temporality: metricdata.CumulativeTemporality, IsMonotonic: true,
		DataPoints: []metricdata.DataPoint[int64]{{Attributes: so("stock.reserve", "ok"), Value: 2}},
	}, r.mustMetric(t, seckillotel.EventsName).Data.(metricdata.Sum[int64]), metricdatatest.IgnoreTimestamp())
	if _, ok := r.metric(t, "seckill.outbox.pending"); ok {
		t.Fatal("a gauge past the stage cap was recorded")
	}
	// Spans: the cap is a metric matter, so limiter.allow has its span; the
	// invalid stage has none; the invalid outcome still traced.
	names := map[string]int{}
	for _, s := range r.spans.Ended() {
		names[s.Name()]++
	}
	if want := map[string]int{"stock.reserve": 3, "limiter.allow": 1}; fmt.Sprint(names) != fmt.Sprint(want) {
		t.Fatalf("spans %v, want %v", names, want)
	}
}

func TestNewErrors(t *testing.T) {
	t.Parallel()
	for name, opt := range map[string]seckillotel.Option{
		"nil meter provider":  seckillotel.WithMeterProvider(nil),
		"nil tracer provider": seckillotel.WithTracerProvider(nil),
		"nil propagator":      seckillotel.WithPropagator(nil),
		"nil clock":           seckillotel.WithClock(nil),
		"zero stages":         seckillotel.WithMaxStages(0),
		"no buckets":          seckillotel.WithBuckets(nil),
		"bucket order":        seckillotel.WithBuckets([]float64{1, .5}),
	} {
		if _, err := seckillotel.New(opt); !errors.Is(err, seckillotel.ErrBadOption) {
			t.Errorf("%s: %v, want ErrBadOption", name, err)
		}
	}
	// Defaults: the global providers (no-op unless set) work.
	o, err := seckillotel.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	o.Observe(context.Background(), observe.Event{Stage: "stock.reserve", Outcome: "ok"})
}

func TestConcurrent(t *testing.T) {
	t.Parallel()
	r := newRig(t, seckillotel.WithMaxStages(3))
	const workers, per = 8, 300
	stages := []string{"stock.reserve", "limiter.allow", "order.consume", "risk.check"}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			ctx := context.Background()
			for i := range per {
				r.obs.Observe(ctx, observe.Event{Stage: stages[(w+i)%len(stages)], Outcome: []string{"ok", "refused"}[i%2]})
			}
		})
	}
	wg.Wait()
	var counted, drops int64
	for _, dp := range r.mustMetric(t, seckillotel.EventsName).Data.(metricdata.Sum[int64]).DataPoints {
		counted += dp.Value
	}
	for _, dp := range r.mustMetric(t, seckillotel.DroppedName).Data.(metricdata.Sum[int64]).DataPoints {
		drops += dp.Value
	}
	if counted+drops != workers*per || drops == 0 {
		t.Fatalf("counted %d + dropped %d, want %d with some dropped (4 stages, cap 3)", counted, drops, workers*per)
	}
	if n := len(r.spans.Ended()); n != workers*per {
		t.Fatalf("spans %d, want %d", n, workers*per)
	}
}
