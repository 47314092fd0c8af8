package seckillprom

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckillkit/seckill/observe"
)

// ErrBadOption is wrapped by [New] for an invalid option; ErrNilRegisterer
// when the registerer is nil; ErrRegister when a fixed metric cannot be
// registered (a name clash on the registerer).
var (
	ErrBadOption     = errors.New("seckillprom: bad option")
	ErrNilRegisterer = errors.New("seckillprom: nil registerer")
	ErrRegister      = errors.New("seckillprom: register metric")
)

// Names of the fixed metrics, and the prefix of the gauge ones.
const (
	EventsName   = "seckill_events_total"
	DurationName = "seckill_stage_duration_seconds"
	DroppedName  = "seckill_observer_dropped_total"
	GaugePrefix  = "seckill_"
)

// Reasons of seckill_observer_dropped_total.
const (
	DropStageLimit = "stage_limit"
	DropInvalid    = "invalid"
	DropRegister   = "register"
)

// Observer turns seckill events into Prometheus metrics. Create it with
// [New]; it is safe for concurrent use.
type Observer struct {
	reg       prometheus.Registerer
	activity  bool
	maxStages int

	events    *prometheus.CounterVec
	durations *prometheus.HistogramVec
	dropped   map[string]prometheus.Counter // reason → counter, fixed at New

	mu     sync.RWMutex
	stages map[string]*stage // guarded by mu
}

var _ observe.Observer = (*Observer)(nil)

// stage holds the series of one stage name. Its maps are guarded by mu.
type stage struct {
	name string

	mu       sync.RWMutex
	children map[labelKey]child
	gauge    *prometheus.GaugeVec // nil until the first gauge event
	gaugeErr bool                 // registering the gauge failed: drop its events
	gauges   map[labelKey]prometheus.Gauge
}

// labelKey is an outcome (or, for gauges, a name) and an activity ("" unless
// WithActivityLabel).
type labelKey struct{ a, activity string }

type child struct {
	count prometheus.Counter
	dur   prometheus.Observer
}

// New registers the fixed metrics on reg and returns an Observer. Gauge
// metrics are registered on reg when their stage is first reported.
func New(reg prometheus.Registerer, opts ...Option) (*Observer, error) {
	if reg == nil {
		return nil, ErrNilRegisterer
	}
	o := options{maxStages: DefaultMaxStages, buckets: DefaultBuckets}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if err := o.check(); err != nil {
		return nil, err
	}
	labels := []string{"stage", "outcome"}
	if o.activity {
		labels = append(labels, "activity")
	}
	ob := &Observer{
		reg:       reg,
		activity:  o.activity,
		maxStages: o.maxStages,
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: EventsName,
			Help: "Operations reported by seckill packages, by stage and outcome.",
		}, labels),
		durations: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    DurationName,
			Help:    "Duration of operations reported by seckill packages, by stage and outcome.",
			Buckets: o.buckets,
		}, labels),
		dropped: make(map[string]prometheus.Counter, 3),
		stages:  make(map[string]*stage),
	}
	dropped := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: DroppedName,
		Help: "Events the seckill Prometheus observer refused: stage_limit (too many stage names), invalid (bad stage, outcome or label value), register (gauge name taken).",
	}, []string{"reason"})
	for _, r := range []string{DropStageLimit, DropInvalid, DropRegister} {
		ob.dropped[r] = dropped.WithLabelValues(r)
	}
	var done []prometheus.Collector
	for _, c := range []prometheus.Collector{ob.events, ob.durations, dropped} {
		if err := reg.Register(c); err != nil {
			for _, d := range done {
				reg.Unregister(d)
			}
			return nil, fmt.Errorf("%w: %w", ErrRegister, err)
		}
		done = append(done, c)
	}
	return ob, nil
}

// Observe records e: a gauge event sets seckill_<stage>{name}; any other
// event increments seckill_events_total and observes its Duration in
// seckill_stage_duration_seconds. ctx is not used.
func (o *Observer) Observe(_ context.Context, e observe.Event) {
	activity := ""
	if o.activity {
		activity = e.Activity
	}
	st := o.stage(e.Stage)
	if st == nil {
		return
	}
	if e.Gauge {
		o.setGauge(st, labelKey{e.Name, activity}, e.Value)
		return
	}
	c, ok := o.child(st, labelKey{e.Outcome, activity})
	if !ok {
		return
	}
	c.count.Inc()
	c.dur.Observe(e.Duration.Seconds())
}

// stage returns the entry of name, creating it if the cap allows; nil (and
// the drop counted) otherwise.
func (o *Observer) stage(name string) *stage {
	o.mu.RLock()
	st := o.stages[name]
	o.mu.RUnlock()
	if st != nil {
		return st
	}
	if !observe.ValidStage(name) {
		o.dropped[DropInvalid].Inc()
		return nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if st = o.stages[name]; st != nil {
		return st
	}
	if len(o.stages) >= o.maxStages {
		o.dropped[DropStageLimit].Inc()
		return nil
	}
	st = &stage{name: name, children: make(map[labelKey]child)}
	o.stages[name] = st
	return st
}

func (o *Observer) child(st *stage, k labelKey) (child, bool) {
	st.mu.RLock()
	c, ok := st.children[k]
	st.mu.RUnlock()
	if ok {
		return c, true
	}
	if !observe.ValidWord(k.a) || !utf8.ValidString(k.activity) {
		o.dropped[DropInvalid].Inc()
		return child{}, false
	}
	lv := []string{st.name, k.a}
	if o.activity {
		lv = append(lv, k.activity)
	}
	cnt, err := o.events.GetMetricWithLabelValues(lv...)
	if err != nil {
		o.dropped[DropInvalid].Inc()
		return child{}, false
	}
	dur, err := o.durations.GetMetricWithLabelValues(lv...)
	if err != nil {
		o.dropped[DropInvalid].Inc()
		return child{}, false
	}
	c = child{count: cnt, dur: dur}
	st.mu.Lock()
	if old, ok := st.children[k]; ok {
		c = old
	} else {
		st.children[k] = c
	}
	st.mu.Unlock()
	return c, true
}

func (o *Observer) setGauge(st *stage, k labelKey, v float64) {
	st.mu.RLock()
	g, ok := st.gauges[k]
	failed := st.gaugeErr
	st.mu.RUnlock()
	if ok {
		g.Set(v)
		return
	}
	if failed {
		o.dropped[DropRegister].Inc()
		return
	}
	if !utf8.ValidString(k.a) || !utf8.ValidString(k.activity) {
		o.dropped[DropInvalid].Inc()
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if g, ok = st.gauges[k]; ok {
		g.Set(v)
		return
	}
	if st.gaugeErr {
		o.dropped[DropRegister].Inc()
		return
	}
	if st.gauge == nil {
		labels := []string{"name"}
		if o.activity {
			labels = append(labels, "activity")
		}
		gv := prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: GaugeName(st.name),
			Help: "Level reported by seckill stage " + st.name + ".",
		}, labels)
		if err := o.reg.Register(gv); err != nil {
			st.gaugeErr = true
			o.dropped[DropRegister].Inc()
			return
		}
		st.gauge = gv
		st.gauges = make(map[labelKey]prometheus.Gauge)
	}
	lv := []string{k.a}
	if o.activity {
		lv = append(lv, k.activity)
	}
	g, err := st.gauge.GetMetricWithLabelValues(lv...)
	if err != nil {
		o.dropped[DropInvalid].Inc()
		return
	}
	st.gauges[k] = g
	g.Set(v)
}

// GaugeName is the metric name of a gauge stage: "seckill_" + stage with
// every '.' replaced by '_' ("breaker.state" → "seckill_breaker_state").
func GaugeName(stage string) string {
	return GaugePrefix + strings.ReplaceAll(stage, ".", "_")
}
