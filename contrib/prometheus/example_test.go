package seckillprom_test

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	seckillprom "github.com/seckillkit/seckill/contrib/prometheus"
	"github.com/seckillkit/seckill/observe"
)

func ExampleNew() {
	reg := prometheus.NewRegistry()
	obs, err := seckillprom.New(reg, seckillprom.WithMaxStages(32))
	if err != nil {
		panic(err)
	}
	// Pass obs to each package's WithObserver option; here two reports by
	// hand: one operation and one gauge reading.
	ctx := context.Background()
	obs.Observe(ctx, observe.Event{Stage: "stock.reserve", Outcome: "sold_out", Duration: 300 * time.Microsecond})
	obs.Observe(ctx, observe.Event{Stage: "breaker.state", Name: "redis", Gauge: true, Value: 2})

	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			switch {
			case m.Counter != nil:
				fmt.Println(mf.GetName(), labels, m.GetCounter().GetValue())
			case m.Gauge != nil:
				fmt.Println(mf.GetName(), labels, m.GetGauge().GetValue())
			}
		}
	}
	// Output:
	// seckill_breaker_state [name=redis] 2
	// seckill_events_total [outcome=sold_out stage=stock.reserve] 1
	// seckill_observer_dropped_total [reason=invalid] 0
	// seckill_observer_dropped_total [reason=register] 0
	// seckill_observer_dropped_total [reason=stage_limit] 0
}
