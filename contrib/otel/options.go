package seckillotel

import (
	"fmt"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// DefaultBuckets are the explicit bucket bounds of seckill.stage.duration,
// in seconds: 50 µs to 1 s.
var DefaultBuckets = []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1}

// DefaultMaxStages is the default cap on distinct stage names with metrics.
const DefaultMaxStages = 64

// Option configures [New]. A nil Option is ignored.
type Option func(*options)

type options struct {
	mp        metric.MeterProvider
	tp        trace.TracerProvider
	prop      propagation.TextMapPropagator
	now       func() time.Time
	activity  bool
	maxStages int
	buckets   []float64
	errs      []string
}

// WithMeterProvider sets where metrics go (default: otel.GetMeterProvider()
// at New). nil is an error.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(o *options) {
		if mp == nil {
			o.errs = append(o.errs, "nil MeterProvider")
		}
		o.mp = mp
	}
}

// WithTracerProvider sets where spans go (default:
// otel.GetTracerProvider() at New). nil is an error.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(o *options) {
		if tp == nil {
			o.errs = append(o.errs, "nil TracerProvider")
		}
		o.tp = tp
	}
}

// WithPropagator sets the propagator of [Observer.Inject] and
// [Observer.Extract] (default: W3C trace context,
// propagation.TraceContext{}). nil is an error.
func WithPropagator(p propagation.TextMapPropagator) Option {
	return func(o *options) {
		if p == nil {
			o.errs = append(o.errs, "nil TextMapPropagator")
		}
		o.prop = p
	}
}

// WithClock sets the source of "now" for span start and end times
// (default time.Now). nil is an error.
func WithClock(now func() time.Time) Option {
	return func(o *options) {
		if now == nil {
			o.errs = append(o.errs, "nil clock")
		}
		o.now = now
	}
}

// WithActivityAttribute adds an activity attribute (Event.Activity) to
// every metric but seckill.observer.dropped. Spans always carry it.
func WithActivityAttribute() Option {
	return func(o *options) { o.activity = true }
}

// WithMaxStages caps the distinct stage names that get metrics (default
// [DefaultMaxStages]); n must be at least 1.
func WithMaxStages(n int) Option {
	return func(o *options) { o.maxStages = n }
}

// WithBuckets sets the histogram bounds in seconds (default
// [DefaultBuckets]); they must be strictly increasing and non-empty.
func WithBuckets(b []float64) Option {
	return func(o *options) { o.buckets = append([]float64(nil), b...) }
}

func (o *options) check() error {
	if len(o.errs) > 0 {
		return fmt.Errorf("%w: %s", ErrBadOption, o.errs[0])
	}
	if o.maxStages < 1 {
		return fmt.Errorf("%w: max stages %d, want at least 1", ErrBadOption, o.maxStages)
	}
	if len(o.buckets) == 0 {
		return fmt.Errorf("%w: no histogram buckets", ErrBadOption)
	}
	for i := 1; i < len(o.buckets); i++ {
		if !(o.buckets[i] > o.buckets[i-1]) {
			return fmt.Errorf("%w: buckets not strictly increasing at %d (%g after %g)", ErrBadOption, i, o.buckets[i], o.buckets[i-1])
		}
	}
	return nil
}
