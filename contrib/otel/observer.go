package seckillotel

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/seckillkit/seckill/observe"
)

// ErrBadOption is wrapped by [New] for an invalid option (a nil
// collaborator, a bad cap or bounds); ErrInstrument when the meter refuses
// an instrument.
var (
	ErrBadOption  = errors.New("seckillotel: bad option")
	ErrInstrument = errors.New("seckillotel: create instrument")
)

// ScopeName is the instrumentation scope of the meter and the tracer.
const ScopeName = "github.com/seckillkit/seckill/contrib/otel"

// Instrument names, and the prefix of the gauge ones.
const (
	EventsName   = "seckill.events"
	DurationName = "seckill.stage.duration"
	DroppedName  = "seckill.observer.dropped"
	GaugePrefix  = "seckill."
)

// Reasons of seckill.observer.dropped.
const (
	DropStageLimit = "stage_limit"
	DropInvalid    = "invalid"
	DropRegister   = "register"
)

// Span attribute keys.
const (
	AttrOutcome  = attribute.Key("seckill.outcome")
	AttrActivity = attribute.Key("seckill.activity")
	AttrName     = attribute.Key("seckill.name")
	AttrValue    = attribute.Key("seckill.value")
)

// Observer records seckill events as OpenTelemetry metrics and spans.
// Create it with [New]; it is safe for concurrent use.
type Observer struct {
	meter     metric.Meter
	tracer    trace.Tracer
	prop      propagation.TextMapPropagator
	now       func() time.Time
	activity  bool
	maxStages int

	events    metric.Int64Counter
	durations metric.Float64Histogram
	dropped   metric.Int64Counter
	dropOpts  map[string][]metric.AddOption // reason → options, fixed at New

	mu     sync.RWMutex
	stages map[string]*stage // guarded by mu
}

var _ observe.Observer = (*Observer)(nil)

// stage holds the cached attribute options of one stage; maps guarded by
// mu.
type stage struct {
	name string

	mu       sync.RWMutex
	children map[labelKey]child
	gauge    metric.Float64Gauge // nil until the first gauge event
	gaugeErr bool
	gauges   map[labelKey][]metric.RecordOption
}

// labelKey is an outcome (for gauges, a name) and an activity ("" unless
// WithActivityAttribute).
type labelKey struct{ a, activity string }

// child keeps the option slices of one series: passing a cached slice to a
// variadic interface method allocates nothing.
type child struct {
	add []metric.AddOption
	rec []metric.RecordOption
}

// New returns an Observer. Without options it uses the global meter and
// tracer providers (otel.GetMeterProvider, otel.GetTracerProvider, read
// once, here) and the W3C trace-context propagator.
func New(opts ...Option) (*Observer, error) {
	o := options{maxStages: DefaultMaxStages, buckets: DefaultBuckets}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if err := o.check(); err != nil {
		return nil, err
	}
	if o.mp == nil {
		o.mp = otel.GetMeterProvider()
	}
	if o.tp == nil {
		o.tp = otel.GetTracerProvider()
	}
	if o.prop == nil {
		o.prop = propagation.TraceContext{}
	}
	if o.now == nil {
		o.now = time.Now
	}
	ob := &Observer{
		meter:     o.mp.Meter(ScopeName),
		tracer:    o.tp.Tracer(ScopeName),
		prop:      o.prop,
		now:       o.now,
		activity:  o.activity,
		maxStages: o.maxStages,
		dropOpts:  make(map[string][]metric.AddOption, 3),
		stages:    make(map[string]*stage),
	}
	var err error
	if ob.events, err = ob.meter.Int64Counter(EventsName,
		metric.WithDescription("Operations reported by seckill packages, by stage and outcome."),
		metric.WithUnit("{event}")); err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrInstrument, EventsName, err)
	}
	if ob.durations, err = ob.meter.Float64Histogram(DurationName,
		metric.WithDescription("Duration of operations reported by seckill packages, by stage and outcome."),
		metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(o.buckets...)); err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrInstrument, DurationName, err)
	}
	if ob.dropped, err = ob.meter.Int64Counter(DroppedName,
		metric.WithDescription("Events the seckill OpenTelemetry observer refused: stage_limit (too many stage names), invalid (bad stage, outcome or attribute value), register (gauge instrument refused)."),
		metric.WithUnit("{event}")); err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrInstrument, DroppedName, err)
	}
	for _, r := range []string{DropStageLimit, DropInvalid, DropRegister} {
		ob.dropOpts[r] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", r)))}
	}
	return ob, nil
}

// Observe records e. A gauge event records seckill.<stage>{name}; any other
// event adds to seckill.events, records its Duration in
// seckill.stage.duration and becomes a span (a child of the span in ctx).
func (o *Observer) Observe(ctx context.Context, e observe.Event) {
	if !observe.ValidStage(e.Stage) {
		o.drop(ctx, DropInvalid)
		return
	}
	if !e.Gauge {
		o.span(ctx, e)
	}
	activity := ""
	if o.activity {
		activity = e.Activity
	}
	st := o.stage(ctx, e.Stage)
	if st == nil {
		return
	}
	if e.Gauge {
		o.recordGauge(ctx, st, labelKey{e.Name, activity}, e.Value)
		return
	}
	c, ok := o.child(ctx, st, labelKey{e.Outcome, activity})
	if !ok {
		return
	}
	o.events.Add(ctx, 1, c.add...)
	o.durations.Record(ctx, e.Duration.Seconds(), c.rec...)
}

// internalKind is made once: building the option boxes it.
var internalKind = trace.WithSpanKind(trace.SpanKindInternal)

func (o *Observer) span(ctx context.Context, e observe.Event) {
	end := o.now()
	_, sp := o.tracer.Start(ctx, e.Stage,
		trace.WithTimestamp(end.Add(-e.Duration)), internalKind)
	if !sp.IsRecording() {
		// Not sampled (or a no-op tracer): no attributes to build.
		sp.End(trace.WithTimestamp(end))
		return
	}
	attrs := make([]attribute.KeyValue, 0, 4)
	attrs = append(attrs, AttrOutcome.String(e.Outcome))
	if e.Activity != "" {
		attrs = append(attrs, AttrActivity.String(e.Activity))
	}
	if e.Name != "" {
		attrs = append(attrs, AttrName.String(e.Name))
	}
	if e.Value != 0 {
		attrs = append(attrs, AttrValue.Float64(e.Value))
	}
	sp.SetAttributes(attrs...)
	if e.Outcome == observe.Error {
		desc := observe.Error
		if e.Err != nil {
			desc = e.Err.Error()
			sp.RecordError(e.Err, trace.WithTimestamp(end))
		}
		sp.SetStatus(codes.Error, desc)
	}
	sp.End(trace.WithTimestamp(end))
}

func (o *Observer) drop(ctx context.Context, reason string) {
	o.dropped.Add(ctx, 1, o.dropOpts[reason]...)
}

// stage returns the entry of name, creating it if the cap allows; nil (and
// the drop counted) otherwise. name is valid.
func (o *Observer) stage(ctx context.Context, name string) *stage {
	o.mu.RLock()
	st := o.stages[name]
	o.mu.RUnlock()
	if st != nil {
		return st
	}
	o.mu.Lock()
	if st = o.stages[name]; st == nil && len(o.stages) < o.maxStages {
		st = &stage{name: name, children: make(map[labelKey]child)}
		o.stages[name] = st
	}
	o.mu.Unlock()
	if st == nil {
		o.drop(ctx, DropStageLimit)
	}
	return st
}

func (o *Observer) child(ctx context.Context, st *stage, k labelKey) (child, bool) {
	st.mu.RLock()
	c, ok := st.children[k]
	st.mu.RUnlock()
	if ok {
		return c, true
	}
	if !observe.ValidWord(k.a) || !utf8.ValidString(k.activity) {
		o.drop(ctx, DropInvalid)
		return child{}, false
	}
	kv := []attribute.KeyValue{attribute.String("stage", st.name), attribute.String("outcome", k.a)}
	if o.activity {
		kv = append(kv, attribute.String("activity", k.activity))
	}
	opt := metric.WithAttributeSet(attribute.NewSet(kv...))
	c = child{add: []metric.AddOption{opt}, rec: []metric.RecordOption{opt}}
	st.mu.Lock()
	if old, ok := st.children[k]; ok {
		c = old
	} else {
		st.children[k] = c
	}
	st.mu.Unlock()
	return c, true
}

func (o *Observer) recordGauge(ctx context.Context, st *stage, k labelKey, v float64) {
	st.mu.RLock()
	g, rec, failed := st.gauge, st.gauges[k], st.gaugeErr
	st.mu.RUnlock()
	if rec != nil {
		g.Record(ctx, v, rec...)
		return
	}
	if failed {
		o.drop(ctx, DropRegister)
		return
	}
	if !utf8.ValidString(k.a) || !utf8.ValidString(k.activity) {
		o.drop(ctx, DropInvalid)
		return
	}
	st.mu.Lock()
	if st.gauge == nil && !st.gaugeErr {
		gauge, err := o.meter.Float64Gauge(GaugeName(st.name),
			metric.WithDescription("Level reported by seckill stage "+st.name+"."))
		if err != nil {
			st.gaugeErr = true
		} else {
			st.gauge = gauge
			st.gauges = make(map[labelKey][]metric.RecordOption)
		}
	}
	if st.gaugeErr {
		st.mu.Unlock()
		o.drop(ctx, DropRegister)
		return
	}
	g = st.gauge
	if rec = st.gauges[k]; rec == nil {
		kv := []attribute.KeyValue{attribute.String("name", k.a)}
		if o.activity {
			kv = append(kv, attribute.String("activity", k.activity))
		}
		rec = []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(kv...))}
		st.gauges[k] = rec
	}
	st.mu.Unlock()
	g.Record(ctx, v, rec...)
}

// Inject writes the trace context of ctx (the span in it) into a new map
// with the configured propagator: put the entries into the Kafka message's
// headers. The map is empty when ctx carries no span.
func (o *Observer) Inject(ctx context.Context) map[string]string {
	c := propagation.MapCarrier{}
	o.prop.Inject(ctx, c)
	return c
}

// Extract returns ctx with the trace context read from headers (a Kafka
// message's headers as a map) by the configured propagator: a span started
// from it, such as the consumer's transaction, continues the producer's
// trace. Headers without a trace context return ctx unchanged in effect.
func (o *Observer) Extract(ctx context.Context, headers map[string]string) context.Context {
	return o.prop.Extract(ctx, propagation.MapCarrier(headers))
}

// GaugeName is the instrument name of a gauge stage: "seckill." + stage
// ("breaker.state" → "seckill.breaker.state").
func GaugeName(stage string) string { return GaugePrefix + stage }
