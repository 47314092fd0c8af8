package seckillprom_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	seckillprom "github.com/seckillkit/seckill/contrib/prometheus"
	"github.com/seckillkit/seckill/observe"
)

func newObserver(t *testing.T, opts ...seckillprom.Option) (*seckillprom.Observer, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	o, err := seckillprom.New(reg, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return o, reg
}

func compare(t *testing.T, reg *prometheus.Registry, want string, names ...string) {
	t.Helper()
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}
}

func TestEventsAndDurations(t *testing.T) {
	t.Parallel()
	o, reg := newObserver(t)
	ctx := context.Background()
	for _, d := range []time.Duration{40 * time.Microsecond, 300 * time.Microsecond, 2 * time.Second} {
		o.Observe(ctx, observe.Event{Stage: "stock.reserve", Outcome: "ok", Activity: "a1", Duration: d})
	}
	o.Observe(ctx, observe.Event{Stage: "stock.reserve", Outcome: "sold_out", Activity: "a2", Duration: 3 * time.Millisecond})
	o.Observe(ctx, observe.Event{Stage: "limiter.allow", Outcome: "error", Err: errors.New("redis: connection refused"), Duration: time.Millisecond})

	compare(t, reg, `
# HELP seckill_events_total Operations reported by seckill packages, by stage and outcome.
# TYPE seckill_events_total counter
seckill_events_total{outcome="error",stage="limiter.allow"} 1
seckill_events_total{outcome="ok",stage="stock.reserve"} 3
seckill_events_total{outcome="sold_out",stage="stock.reserve"} 1
`, seckillprom.EventsName)

	compare(t, reg, `
# HELP seckill_stage_duration_seconds Duration of operations reported by seckill packages, by stage and outcome.
# TYPE seckill_stage_duration_seconds histogram
seckill_stage_duration_seconds_bucket{outcome="error",stage="limiter.allow",le="5e-05"} 0
seckill_stage_duration_seconds_bucket{outcome="error",stage="limiter.allow",le="0.0001"} 0
seckill_stage_duration_seconds_bucket{outcome="error",stage="limiter.allow",le="0.00025"} 0
seckill_stage_duration_seconds_bucket{outcome="error",stage="limiter.allow",le="0.0005"} 0
seckill_stage_duration_seconds_bucket{outcome="error",stage="limiter.allow",le="0.001"} 1
seckill_stage_duration_seconds_bucket{outcome="error",stage="limiter.allow",le="0.0025"} 1
seckill_stage_duration_seconds_bucket{outcome="error",stage="limiter.allow",le="0.005"} 1
seckill_stage_duration_seconds_bucket{outcome="error",stage="limiter.allow",le="0.01"} 1
seckill_stage_duration_seconds_bucket{outcome="error",stage="limiter.allow",le="0.025"} 1
seckill_stage_duration_seconds_bucket{outcome="error",stage="limiter.allow",le="0.05"} 1
seckill_stage_duration_seconds_bucket{outcome="error",stage="limiter.allow",le="0.1"} 1
seckill_stage_duration_seconds_bucket{outcome="error",stage="limiter.allow",le="0.25"} 1
seckill_stage_duration_seconds_bucket{outcome="error",stage="limiter.allow",le="0.5"} 1
seckill_stage_duration_seconds_bucket{outcome="error",stage="limiter.allow",le="1"} 1
seckill_stage_duration_seconds_bucket{outcome="error",stage="limiter.allow",le="+Inf"} 1
seckill_stage_duration_seconds_sum{outcome="error",stage="limiter.allow"} 0.001
seckill_stage_duration_seconds_count{outcome="error",stage="limiter.allow"} 1
seckill_stage_duration_seconds_bucket{outcome="ok",stage="stock.reserve",le="5e-05"} 1
seckill_stage_duration_seconds_bucket{outcome="ok",stage="stock.reserve",le="0.0001"} 1
seckill_stage_duration_seconds_bucket{outcome="ok",stage="stock.reserve",le="0.00025"} 1
seckill_stage_duration_seconds_bucket{outcome="ok",stage="stock.reserve",le="0.0005"} 2
seckill_stage_duration_seconds_bucket{outcome="ok",stage="stock.reserve",le="0.001"} 2
seckill_stage_duration_seconds_bucket{outcome="ok",stage="stock.reserve",le="0.0025"} 2
seckill_stage_duration_seconds_bucket{outcome="ok",stage="stock.reserve",le="0.005"} 2
seckill_stage_duration_seconds_bucket{outcome="ok",stage="stock.reserve",le="0.01"} 2
seckill_stage_duration_seconds_bucket{outcome="ok",stage="stock.reserve",le="0.025"} 2
seckill_stage_duration_seconds_bucket{outcome="ok",stage="stock.reserve",le="0.05"} 2
seckill_stage_duration_seconds_bucket{outcome="ok",stage="stock.reserve",le="0.1"} 2
seckill_stage_duration_seconds_bucket{outcome="ok",stage="stock.reserve",le="0.25"} 2
seckill_stage_duration_seconds_bucket{outcome="ok",stage="stock.reserve",le="0.5"} 2
seckill_stage_duration_seconds_bucket{outcome="ok",stage="stock.reserve",le="1"} 2
seckill_stage_duration_seconds_bucket{outcome="ok",stage="stock.reserve",le="+Inf"} 3
seckill_stage_duration_seconds_sum{outcome="ok",stage="stock.reserve"} 2.00034
seckill_stage_duration_seconds_count{outcome="ok",stage="stock.reserve"} 3
seckill_stage_duration_seconds_bucket{outcome="sold_out",stage="stock.reserve",le="5e-05"} 0
seckill_stage_duration_seconds_bucket{outcome="sold_out",stage="stock.reserve",le="0.0001"} 0
seckill_stage_duration_seconds_bucket{outcome="sold_out",stage="stock.reserve",le="0.00025"} 0
seckill_stage_duration_seconds_bucket{outcome="sold_out",stage="stock.reserve",le="0.0005"} 0
seckill_stage_duration_seconds_bucket{outcome="sold_out",stage="stock.reserve",le="0.001"} 0
seckill_stage_duration_seconds_bucket{outcome="sold_out",stage="stock.reserve",le="0.0025"} 0
seckill_stage_duration_seconds_bucket{outcome="sold_out",stage="stock.reserve",le="0.005"} 1
seckill_stage_duration_seconds_bucket{outcome="sold_out",stage="stock.reserve",le="0.01"} 1
seckill_stage_duration_seconds_bucket{outcome="sold_out",stage="stock.reserve",le="0.025"} 1
seckill_stage_duration_seconds_bucket{outcome="sold_out",stage="stock.reserve",le="0.05"} 1
seckill_stage_duration_seconds_bucket{outcome="sold_out",stage="stock.reserve",le="0.1"} 1
seckill_stage_duration_seconds_bucket{outcome="sold_out",stage="stock.reserve",le="0.25"} 1
seckill_stage_duration_seconds_bucket{outcome="sold_out",stage="stock.reserve",le="0.5"} 1
seckill_stage_duration_seconds_bucket{outcome="sold_out",stage="stock.reserve",le="1"} 1
seckill_stage_duration_seconds_bucket{outcome="sold_out",stage="stock.reserve",le="+Inf"} 1
seckill_stage_duration_seconds_sum{outcome="sold_out",stage="stock.reserve"} 0.003
seckill_stage_duration_seconds_count{outcome="sold_out",stage="stock.reserve"} 1
`, seckillprom.DurationName)

	// No gauge was reported, nothing was dropped.
	compare(t, reg, droppedText(0, 0, 0), seckillprom.DroppedName)
	if n, err := testutil.GatherAndCount(reg); err != nil || n != 3+3+3 {
		t.Fatalf("series in the registry: %d (%v), want 3 counters, 3 histograms, 3 dropped reasons", n, err)
	}
}

func droppedText(invalid, register, limit int) string {
	return fmt.Sprintf(`
# HELP seckill_observer_dropped_total Events the seckill Prometheus observer refused: stage_limit (too many stage names), invalid (bad stage, outcome or label value), register (gauge name taken).
# TYPE seckill_observer_dropped_total counter
seckill_observer_dropped_total{reason="invalid"} %d
seckill_observer_dropped_total{reason="register"} %d
seckill_observer_dropped_total{reason="stage_limit"} %d
`, invalid, register, limit)
}

func TestGauges(t *testing.T) {
	t.Parallel()
	o, reg := newObserver(t)
	ctx := context.Background()
	o.Observe(ctx, observe.Event{Stage: "breaker.state", Name: "redis", Gauge: true, Value: 2})
	o.Observe(ctx, observe.Event{Stage: "breaker.state", Name: "db", Gauge: true, Value: 1})
	o.Observe(ctx, observe.Event{Stage: "breaker.state", Name: "db", Gauge: true, Value: 0})
	o.Observe(ctx, observe.Event{Stage: "outbox.oldest_pending_seconds", Gauge: true, Value: 61.5})
	// Without WithActivityLabel two activities share one series: the last
	// reading wins.
	o.Observe(ctx, observe.Event{Stage: "order.reconcile_drift", Activity: "a1", Gauge: true, Value: 3})
	o.Observe(ctx, observe.Event{Stage: "order.reconcile_drift", Activity: "a2", Gauge: true, Value: -1})

	compare(t, reg, `
# HELP seckill_breaker_state Level reported by seckill stage breaker.state.
# TYPE seckill_breaker_state gauge
seckill_breaker_state{name="db"} 0
seckill_breaker_state{name="redis"} 2
# HELP seckill_outbox_oldest_pending_seconds Level reported by seckill stage outbox.oldest_pending_seconds.
# TYPE seckill_outbox_oldest_pending_seconds gauge
seckill_outbox_oldest_pending_seconds{name=""} 61.5
# HELP seckill_order_reconcile_drift Level reported by seckill stage order.reconcile_drift.
# TYPE seckill_order_reconcile_drift gauge
seckill_order_reconcile_drift{name=""} -1
`, "seckill_breaker_state", "seckill_outbox_oldest_pending_seconds", "seckill_order_reconcile_drift")
	// A gauge reading is not an operation: nothing counted.
	if n, err := testutil.GatherAndCount(reg, seckillprom.EventsName, seckillprom.DurationName); err != nil || n != 0 {
		t.Fatalf("event series after gauge readings only: %d (%v), want 0", n, err)
	}
}

func TestActivityLabel(t *testing.T) {
	t.Parallel()
	o, reg := newObserver(t, seckillprom.WithActivityLabel(), nil)
	ctx := context.Background()
	o.Observe(ctx, observe.Event{Stage: "stock.reserve", Outcome: "ok", Activity: "a1", Duration: time.Millisecond})
	o.Observe(ctx, observe.Event{Stage: "stock.reserve", Outcome: "ok", Activity: "a1", Duration: time.Millisecond})
	o.Observe(ctx, observe.Event{Stage: "stock.reserve", Outcome: "ok", Activity: "a2", Duration: time.Millisecond})
	o.Observe(ctx, observe.Event{Stage: "order.reconcile_drift", Activity: "a1", Gauge: true, Value: 3})
	o.Observe(ctx, observe.Event{Stage: "order.reconcile_drift", Activity: "a2", Gauge: true, Value: 0})
	compare(t, reg, `
# HELP seckill_events_total Operations reported by seckill packages, by stage and outcome.
# TYPE seckill_events_total counter
seckill_events_total{activity="a1",outcome="ok",stage="stock.reserve"} 2
seckill_events_total{activity="a2",outcome="ok",stage="stock.reserve"} 1
# HELP seckill_order_reconcile_drift Level reported by seckill stage order.reconcile_drift.
# TYPE seckill_order_reconcile_drift gauge
seckill_order_reconcile_drift{activity="a1",name=""} 3
seckill_order_reconcile_drift{activity="a2",name=""} 0
`, seckillprom.EventsName, "seckill_order_reconcile_drift")
	if n, err := testutil.GatherAndCount(reg, seckillprom.DurationName); err != nil || n != 2 {
		t.Fatalf("histogram series: %d (%v), want 2 (one per activity)", n, err)
	}
}

func TestStageCap(t *testing.T) {
	t.Parallel()
	o, reg := newObserver(t, seckillprom.WithMaxStages(2))
	ctx := context.Background()
	o.Observe(ctx, observe.Event{Stage: "stock.reserve", Outcome: "ok"})
	o.Observe(ctx, observe.Event{Stage: "breaker.state", Name: "redis", Gauge: true, Value: 2})
	// Past the cap: a third stage, as an event and as a gauge, twice.
	o.Observe(ctx, observe.Event{Stage: "limiter.allow", Outcome: "ok"})
	o.Observe(ctx, observe.Event{Stage: "limiter.allow", Outcome: "limited"})
	o.Observe(ctx, observe.Event{Stage: "outbox.pending", Gauge: true, Value: 7})
	// Known stages keep working, with new outcomes too.
	o.Observe(ctx, observe.Event{Stage: "stock.reserve", Outcome: "sold_out"})
	o.Observe(ctx, observe.Event{Stage: "stock.reserve", Outcome: "ok"})
	compare(t, reg, `
# HELP seckill_events_total Operations reported by seckill packages, by stage and outcome.
# TYPE seckill_events_total counter
seckill_events_total{outcome="ok",stage="stock.reserve"} 2
seckill_events_total{outcome="sold_out",stage="stock.reserve"} 1
`, seckillprom.EventsName)
	compare(t, reg, droppedText(0, 0, 3), seckillprom.DroppedName)
	if n, err := testutil.GatherAndCount(reg, "seckill_outbox_pending"); err != nil || n != 0 {
		t.Fatalf("seckill_outbox_pending series: %d (%v), want 0: its stage is past the cap", n, err)
	}
}

func TestInvalidDropped(t *testing.T) {
	t.Parallel()
	o, reg := newObserver(t, seckillprom.WithActivityLabel())
	ctx := context.Background()
	bad := []observe.Event{
		{Stage: "", Outcome: "ok"},
		{Stage: "stock", Outcome: "ok"},
		{Stage: "Stock.Reserve", Outcome: "ok"},
		{Stage: "stock..reserve", Outcome: "ok"},
		{Stage: "stock.reserve.", Outcome: "ok"},
		{Stage: ".stock", Outcome: "ok"},
		{Stage: "stock.1reserve", Outcome: "ok"},
		{Stage: "stock.re-serve", Outcome: "ok"},
		{Stage: "stock.reserve\n", Outcome: "ok"},
		{Stage: "stock." + strings.Repeat("x", 100), Outcome: "ok"},
		{Stage: "stock.reserve", Outcome: ""},
		{Stage: "stock.reserve", Outcome: "Sold Out"},
		{Stage: "stock.reserve", Outcome: "sold-out"},
		{Stage: "stock.reserve", Outcome: "ok", Activity: "a\xff"},
		{Stage: "breaker.state", Name: "re\xffdis", Gauge: true, Value: 1},
		{Stage: "breaker.state", Activity: "\xc3", Gauge: true, Value: 1},
		{Stage: "", Gauge: true, Value: 1},
	}
	for _, e := range bad {
		o.Observe(ctx, e)
	}
	compare(t, reg, droppedText(len(bad), 0, 0), seckillprom.DroppedName)
	if n, err := testutil.GatherAndCount(reg, seckillprom.EventsName, seckillprom.DurationName, "seckill_breaker_state"); err != nil || n != 0 {
		t.Fatalf("series after invalid events only: %d (%v), want 0", n, err)
	}
	// Valid stages that only met bad outcomes did take a slot, and work.
	o.Observe(ctx, observe.Event{Stage: "stock.reserve", Outcome: "ok", Activity: "a1"})
	compare(t, reg, `
# HELP seckill_events_total Operations reported by seckill packages, by stage and outcome.
# TYPE seckill_events_total counter
seckill_events_total{activity="a1",outcome="ok",stage="stock.reserve"} 1
`, seckillprom.EventsName)
}

func TestGaugeNameTaken(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	// The example's own breaker gauge, registered first on the same registry.
	mine := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "seckill_breaker_state", Help: "mine"}, []string{"name"})
	reg.MustRegister(mine)
	mine.WithLabelValues("redis").Set(1)
	o, err := seckillprom.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	o.Observe(ctx, observe.Event{Stage: "breaker.state", Name: "redis", Gauge: true, Value: 2})
	o.Observe(ctx, observe.Event{Stage: "breaker.state", Name: "db", Gauge: true, Value: 2})
	compare(t, reg, droppedText(0, 2, 0), seckillprom.DroppedName)
	if v := testutil.ToFloat64(mine.WithLabelValues("redis")); v != 1 {
		t.Fatalf("the other collector's gauge: %v, want 1 (untouched)", v)
	}
	// Events of that stage are still counted.
	o.Observe(ctx, observe.Event{Stage: "breaker.state", Outcome: "ok"})
	if n, err := testutil.GatherAndCount(reg, seckillprom.EventsName); err != nil || n != 1 {
		t.Fatalf("event series: %d (%v), want 1", n, err)
	}
}

func TestNewErrors(t *testing.T) {
	t.Parallel()
	if _, err := seckillprom.New(nil); !errors.Is(err, seckillprom.ErrNilRegisterer) {
		t.Fatalf("nil registerer: %v", err)
	}
	for name, opt := range map[string]seckillprom.Option{
		"zero stages":    seckillprom.WithMaxStages(0),
		"no buckets":     seckillprom.WithBuckets(nil),
		"bucket order":   seckillprom.WithBuckets([]float64{.1, .01}),
		"equal buckets":  seckillprom.WithBuckets([]float64{.1, .1}),
		"negative limit": seckillprom.WithMaxStages(-1),
	} {
		if _, err := seckillprom.New(prometheus.NewRegistry(), opt); !errors.Is(err, seckillprom.ErrBadOption) {
			t.Errorf("%s: %v, want ErrBadOption", name, err)
		}
	}

	// A clash on a fixed name: nothing of this observer stays registered.
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewHistogram(prometheus.HistogramOpts{Name: seckillprom.DurationName, Help: "other"}))
	if _, err := seckillprom.New(reg); !errors.Is(err, seckillprom.ErrRegister) {
		t.Fatalf("name clash: %v, want ErrRegister", err)
	}
	// The events counter, registered before the clash, was taken back: a
	// counter of the same description registers without a clash.
	again := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: seckillprom.EventsName,
		Help: "Operations reported by seckill packages, by stage and outcome.",
	}, []string{"stage", "outcome"})
	if err := reg.Register(again); err != nil {
		t.Fatalf("the events counter of the failed New is still registered: %v", err)
	}
}

func TestCustomBuckets(t *testing.T) {
	t.Parallel()
	o, reg := newObserver(t, seckillprom.WithBuckets([]float64{.001, .01}))
	o.Observe(context.Background(), observe.Event{Stage: "order.consume", Outcome: "ok", Duration: 5 * time.Millisecond})
	compare(t, reg, `
# HELP seckill_stage_duration_seconds Duration of operations reported by seckill packages, by stage and outcome.
# TYPE seckill_stage_duration_seconds histogram
seckill_stage_duration_seconds_bucket{outcome="ok",stage="order.consume",le="0.001"} 0
seckill_stage_duration_seconds_bucket{outcome="ok",stage="order.consume",le="0.01"} 1
seckill_stage_duration_seconds_bucket{outcome="ok",stage="order.consume",le="+Inf"} 1
seckill_stage_duration_seconds_sum{outcome="ok",stage="order.consume"} 0.005
seckill_stage_duration_seconds_count{outcome="ok",stage="order.consume"} 1
`, seckillprom.DurationName)
}

// TestConcurrent reports from many goroutines at once, new stages and
// outcomes appearing while others are counted; run it with -race.
func TestConcurrent(t *testing.T) {
	t.Parallel()
	o, reg := newObserver(t, seckillprom.WithMaxStages(3))
	const workers, per = 8, 500
	stages := []string{"stock.reserve", "limiter.allow", "order.consume", "risk.check"}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			ctx := context.Background()
			for i := range per {
				o.Observe(ctx, observe.Event{Stage: stages[(w+i)%len(stages)], Outcome: []string{"ok", "refused"}[i%2], Duration: time.Microsecond})
				o.Observe(ctx, observe.Event{Stage: "breaker.state", Name: fmt.Sprint("b", w), Gauge: true, Value: float64(i)})
			}
		})
	}
	wg.Wait()
	// 5 stages were offered to a cap of 3: which 3 got in depends on the
	// race, but every event is either counted or dropped, never lost.
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var counted, dropped, gauges float64
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			switch mf.GetName() {
			case seckillprom.EventsName:
				counted += m.GetCounter().GetValue()
			case seckillprom.DroppedName:
				dropped += m.GetCounter().GetValue()
			case "seckill_breaker_state":
				gauges++
				if v := m.GetGauge().GetValue(); v != per-1 {
					t.Errorf("gauge %v = %v, want %d (the last reading)", m.GetLabel(), v, per-1)
				}
			}
		}
	}
	total := float64(workers * per * 2)
	if counted+dropped+gauges*per != total {
		t.Fatalf("counted %v + dropped %v + gauge readings %v = %v, want %v", counted, dropped, gauges*per, counted+dropped+gauges*per, total)
	}
	if dropped == 0 {
		t.Fatal("nothing dropped although 5 stages met a cap of 3")
	}
}

// TestObserveDoesNotAllocate pins the hot path: a known (stage, outcome) and
// a known gauge series cost no allocation.
func TestObserveDoesNotAllocate(t *testing.T) {
	o, _ := newObserver(t)
	ctx := context.Background()
	ev := observe.Event{Stage: "stock.reserve", Outcome: "ok", Activity: "a1", Duration: 120 * time.Microsecond}
	g := observe.Event{Stage: "breaker.state", Name: "redis", Gauge: true, Value: 2}
	o.Observe(ctx, ev)
	o.Observe(ctx, g)
	if n := testing.AllocsPerRun(100, func() { o.Observe(ctx, ev); o.Observe(ctx, g) }); n != 0 {
		t.Fatalf("allocations per Observe pair: %v, want 0", n)
	}
}
