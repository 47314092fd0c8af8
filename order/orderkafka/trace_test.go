package orderkafka

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/seckillkit/seckill/internal/observe"
	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/order/handoff"
	"github.com/seckillkit/seckill/order/reconcile"
)

type traceKey struct{}

// A header made from the context at Submit travels through Kafka (kfake)
// and arrives in the context of the consumer's TxHook and observer, and on
// the orders the hook gets: a fake propagator that copies a map.
func TestTraceHeadersThroughKafka(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		brokers := testenv.Kafka(t, 1, "orders")
		addActivity(t, db, "1", 10, 1)
		inject := func(ctx context.Context) map[string]string {
			if id, ok := ctx.Value(traceKey{}).(string); ok {
				return map[string]string{"traceparent": id}
			}
			return nil
		}
		extract := func(ctx context.Context, h map[string]string) context.Context {
			if id, ok := h["traceparent"]; ok {
				return context.WithValue(ctx, traceKey{}, id)
			}
			return ctx
		}
		prod, err := NewProducer(syncProducer(t, brokers), "orders", WithHeaders(inject))
		require.NoError(t, err)
		led := newLedger()
		sub, err := handoff.NewSubmitter(prod.Publish, (&memFallback{}).Store, led)
		require.NoError(t, err)

		var mu sync.Mutex
		hookTrace := map[string]string{}  // reservation → trace in the hook's ctx
		orderTrace := map[string]string{} // reservation → trace on the order
		observed := map[string]int{}      // trace in the observer's ctx → events
		hook := func(ctx context.Context, _ *gorm.DB, orders []order.Order) error {
			mu.Lock()
			defer mu.Unlock()
			id, _ := ctx.Value(traceKey{}).(string)
			for _, o := range orders {
				hookTrace[o.ReservationID] = id
				orderTrace[o.ReservationID] = o.Headers["traceparent"]
			}
			return nil
		}
		obs := observe.Func(func(ctx context.Context, e observe.Event) {
			if e.Stage == order.StageConsume {
				id, _ := ctx.Value(traceKey{}).(string)
				mu.Lock()
				observed[id]++
				mu.Unlock()
			}
		})
		p := newProc(t, db, order.WithTxHook(hook))
		// one message at a time: each message's transaction has its own context
		c, err := order.NewConsumer(p, led, order.WithBatchSize(1), order.WithContextFrom(extract), order.WithObserver(obs))
		require.NoError(t, err)
		h := newHandler(t, c)

		for i := 0; i < 3; i++ {
			m := msg(i, "1", num(100+i))
			led.reserve("1", reconcile.Reservation{ID: m.ReservationID})
			ctx := context.WithValue(context.Background(), traceKey{}, "trace-"+num(i))
			route, err := sub.Submit(ctx, m)
			require.NoError(t, err)
			require.Equal(t, handoff.RouteKafka, route)
		}
		// a message published without a trace
		m := msg(3, "1", "103")
		led.reserve("1", reconcile.Reservation{ID: m.ReservationID})
		_, err = sub.Submit(context.Background(), m)
		require.NoError(t, err)

		runGroup(t, brokers, nil, "g-trace", "orders", h)
		// The observer hears of a batch after its commit: wait for both.
		eventually(t, 20*time.Second, func() bool {
			mu.Lock()
			n := 0
			for _, k := range observed {
				n += k
			}
			mu.Unlock()
			return countOrders(t, db, "") == 4 && n == 4
		}, "4 orders, 4 consume events")
		mu.Lock()
		defer mu.Unlock()
		want := map[string]string{"r-0": "trace-0", "r-1": "trace-1", "r-2": "trace-2", "r-3": ""}
		assert.Equal(t, want, hookTrace, "the hook's context carries the producer's trace")
		assert.Equal(t, want, orderTrace, "each order carries its message's headers")
		assert.Equal(t, map[string]int{"trace-0": 1, "trace-1": 1, "trace-2": 1, "": 1}, observed)
		checkConservation(t, db, "1", 10)
	})
}
