package orderkafka

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/seckillkit/seckill/internal/observe"
	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/order/handoff"
	"github.com/seckillkit/seckill/order/reconcile"
)

// testSaramaConfig is SaramaConfig with short timeouts for loopback kfake.
func testSaramaConfig() *sarama.Config {
	c := SaramaConfig()
	c.ClientID = "order-test"
	c.Net.DialTimeout = 500 * time.Millisecond
	c.Net.ReadTimeout = 3 * time.Second
	c.Net.WriteTimeout = 3 * time.Second
	c.Metadata.Retry.Max = 2
	c.Metadata.Retry.Backoff = 20 * time.Millisecond
	c.Producer.Retry.Max = 2
	c.Producer.Retry.Backoff = 20 * time.Millisecond
	c.Consumer.MaxWaitTime = 50 * time.Millisecond
	c.Consumer.Offsets.AutoCommit.Interval = 50 * time.Millisecond
	c.Consumer.Group.Heartbeat.Interval = 200 * time.Millisecond
	c.Consumer.Group.Session.Timeout = 6 * time.Second // kfake: group.min.session.timeout.ms = 6000
	c.Consumer.Group.Rebalance.Timeout = 3 * time.Second
	c.Consumer.Group.Rebalance.Retry.Backoff = 50 * time.Millisecond
	return c
}

func syncProducer(t testing.TB, brokers []string) sarama.SyncProducer {
	t.Helper()
	sp, err := sarama.NewSyncProducer(brokers, testSaramaConfig())
	require.NoError(t, err)
	t.Cleanup(func() { _ = sp.Close() })
	return sp
}

type groupRun struct {
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
	g      sarama.ConsumerGroup
}

func (r *groupRun) stop() {
	r.once.Do(func() {
		r.cancel()
		<-r.done
		_ = r.g.Close()
	})
}

func runGroup(t testing.TB, brokers []string, cfg *sarama.Config, group, topic string, h sarama.ConsumerGroupHandler) *groupRun {
	t.Helper()
	if cfg == nil {
		cfg = testSaramaConfig()
	}
	g, err := sarama.NewConsumerGroup(brokers, group, cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	r := &groupRun{cancel: cancel, done: make(chan struct{}), g: g}
	go func() {
		for range g.Errors() {
		}
	}()
	go func() {
		defer close(r.done)
		for ctx.Err() == nil {
			if err := g.Consume(ctx, []string{topic}, h); err != nil {
				t.Logf("consume: %v", err)
				if errors.Is(err, sarama.ErrClosedConsumerGroup) {
					return
				}
				select {
				case <-ctx.Done():
				case <-time.After(50 * time.Millisecond):
				}
			}
		}
	}()
	t.Cleanup(r.stop)
	return r
}

func dedupCount(t testing.TB, db *gorm.DB) int64 {
	t.Helper()
	var n int64
	require.NoError(t, db.Model(&order.Dedup{}).Count(&n).Error)
	return n
}

// Kafka end to end with a shop's string IDs: UUID buyers of an activity
// named by a string, every message published twice, a rebalance, and
// redeliveries; the invariants are counted with SQL.
func TestKafkaDuplicatesAndRebalance(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		brokers := testenv.Kafka(t, 3, "orders")
		const act = "flash.sale-2026"
		addActivity(t, db, act, 1000, 1)
		led := newLedger()
		prod, err := NewProducer(syncProducer(t, brokers), "orders")
		require.NoError(t, err)
		ctx := context.Background()

		accepted := 0
		publish := func(from, to int) {
			for i := from; i < to; i++ {
				m := msg(i, act, uuidUser(1000+i))
				led.reserve(act, reconcile.Reservation{ID: m.ReservationID, User: m.UserID, Qty: 1})
				require.NoError(t, prod.Publish(ctx, m))
				require.NoError(t, prod.Publish(ctx, m), "same message twice")
				accepted++
			}
		}
		newConsumer := func(machine int64) *Handler {
			p, err := order.NewProcessor(db, newGen(t, machine))
			require.NoError(t, err)
			c, err := order.NewConsumer(p, led, order.WithBatchSize(16))
			require.NoError(t, err)
			return newHandler(t, c, WithLinger(time.Millisecond))
		}
		c1 := newConsumer(1)
		publish(0, 40)
		runGroup(t, brokers, nil, "g1", "orders", c1)
		eventually(t, 20*time.Second, func() bool { return dedupCount(t, db) == 40 }, "first 40")

		// A second member joins: rebalance. Then old messages are delivered again
		// (re-published) alongside new ones.
		c2 := newConsumer(2)
		runGroup(t, brokers, nil, "g1", "orders", c2)
		publish(40, 80)
		for i := 0; i < 40; i += 3 {
			require.NoError(t, prod.Publish(ctx, msg(i, act, uuidUser(1000+i))), "redelivery after the rebalance")
		}
		eventually(t, 30*time.Second, func() bool { return dedupCount(t, db) == 80 }, "all 80")
		// let any in-flight duplicate settle, then count
		time.Sleep(200 * time.Millisecond)
		orders := countOrders(t, db, "")
		assert.EqualValues(t, 80, orders)
		assert.EqualValues(t, accepted-led.releases(), orders, "orders = accepted − releases")
		assert.Equal(t, 0, led.releases())
		checkConservation(t, db, act, 1000)
		// straight from SQL: one order per reservation and per buyer, each
		// buyer the UUID of their message, every dedup row a success
		var c struct{ Orders, Reservations, Users, Dedup, Failed int64 }
		require.NoError(t, db.Raw("SELECT COUNT(*) AS orders, COUNT(DISTINCT reservation_id) AS reservations, COUNT(DISTINCT user_id) AS users, "+
			"(SELECT COUNT(*) FROM message_dedup) AS dedup, (SELECT COUNT(*) FROM message_dedup WHERE outcome <> 'SUCCESS') AS failed "+
			"FROM seckill_order WHERE activity_id = ?", act).Scan(&c).Error)
		assert.Equal(t, struct{ Orders, Reservations, Users, Dedup, Failed int64 }{80, 80, 80, 80, 0}, c)
		var over int64
		require.NoError(t, db.Raw("SELECT COUNT(*) FROM (SELECT user_id FROM seckill_order WHERE activity_id = ? "+
			"GROUP BY user_id HAVING COUNT(*) > 1) x", act).Scan(&over).Error)
		assert.Zero(t, over, "no buyer above the cap of 1")
		var pairs []struct{ ReservationID, UserID string }
		require.NoError(t, db.Raw("SELECT reservation_id, user_id FROM seckill_order").Scan(&pairs).Error)
		for _, p := range pairs {
			var i int
			_, err := fmt.Sscanf(p.ReservationID, "r-%d", &i)
			require.NoError(t, err)
			assert.Equal(t, uuidUser(1000+i), p.UserID, p.ReservationID)
		}
	})
}

func TestKafkaKilledBetweenDBCommitAndOffsetCommit(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		brokers := testenv.Kafka(t, 3, "orders")
		addActivity(t, db, "1", 1000, 1)
		led := newLedger()
		prod, err := NewProducer(syncProducer(t, brokers), "orders")
		require.NoError(t, err)
		for i := 0; i < 30; i++ {
			m := msg(i, "1", num(1000+i))
			led.reserve("1", reconcile.Reservation{ID: m.ReservationID})
			require.NoError(t, prod.Publish(context.Background(), m))
		}
		newConsumer := func(machine int64, n order.Notifier) *Handler {
			p, err := order.NewProcessor(db, newGen(t, machine))
			require.NoError(t, err)
			c, err := order.NewConsumer(p, led, order.WithBatchSize(8), order.WithNotifier(n))
			require.NoError(t, err)
			return newHandler(t, c, WithLinger(time.Millisecond))
		}

		// First consumer: offsets are never committed (auto-commit off and no
		// Commit call): it dies after its DB commits, before any offset commit.
		cfg := testSaramaConfig()
		cfg.Consumer.Offsets.AutoCommit.Enable = false
		c1 := newConsumer(1, notifierFunc(func(context.Context, order.Result) {}))
		r1 := runGroup(t, brokers, cfg, "g-crash", "orders", c1)
		eventually(t, 20*time.Second, func() bool { return countOrders(t, db, "") == 30 }, "first run writes all")
		r1.stop()

		// Restart: everything is redelivered from the oldest offset.
		var seen atomic.Int64
		c2 := newConsumer(2, notifierFunc(func(context.Context, order.Result) { seen.Add(1) }))
		runGroup(t, brokers, nil, "g-crash", "orders", c2)
		eventually(t, 20*time.Second, func() bool { return seen.Load() >= 30 }, "redelivery")
		assert.EqualValues(t, 30, countOrders(t, db, ""), "no duplicate order")
		assert.EqualValues(t, 30, dedupCount(t, db))
		assert.EqualValues(t, 30-led.releases(), countOrders(t, db, ""))
		checkConservation(t, db, "1", 1000)
	})
}

func TestKafkaPoisonToDeadLetterTopic(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		brokers := testenv.Kafka(t, 1, "orders", "orders.dlq")
		addActivity(t, db, "1", 100, 1)
		sp := syncProducer(t, brokers)
		prod, err := NewProducer(sp, "orders")
		require.NoError(t, err)
		ctx := context.Background()
		require.NoError(t, prod.Publish(ctx, msg(0, "1", "100")))
		_, _, err = sp.SendMessage(&sarama.ProducerMessage{Topic: "orders", Key: sarama.StringEncoder("7"), Value: sarama.StringEncoder("not json")})
		require.NoError(t, err)
		require.NoError(t, prod.Publish(ctx, msg(2, "1", "102")))

		dlq, err := NewDeadLetterTopic(sp, "orders.dlq")
		require.NoError(t, err)
		p, err := order.NewProcessor(db, newGen(t, 1))
		require.NoError(t, err)
		var deadLettered atomic.Int64
		c, err := order.NewConsumer(p, newLedger(), order.WithDeadLetter(dlq),
			order.WithObserver(observe.Func(func(_ context.Context, e observe.Event) {
				if e.Stage == order.StageConsume && e.Outcome == "dead_letter" {
					deadLettered.Add(int64(e.Value))
				}
			})))
		require.NoError(t, err)
		runGroup(t, brokers, nil, "g-dlq", "orders", newHandler(t, c, WithLinger(time.Millisecond)))
		eventually(t, 20*time.Second, func() bool { return countOrders(t, db, "") == 2 }, "neighbours")

		cons, err := sarama.NewConsumer(brokers, testSaramaConfig())
		require.NoError(t, err)
		defer cons.Close()
		pc, err := cons.ConsumePartition("orders.dlq", 0, sarama.OffsetOldest)
		require.NoError(t, err)
		defer pc.Close()
		select {
		case m := <-pc.Messages():
			assert.Equal(t, "not json", string(m.Value))
			assert.Equal(t, "7", string(m.Key))
			hdr := map[string]string{}
			for _, h := range m.Headers {
				hdr[string(h.Key)] = string(h.Value)
			}
			assert.Equal(t, "orders", hdr["x-topic"])
			assert.Equal(t, "1", hdr["x-offset"])
			assert.Contains(t, hdr["x-error"], "invalid message")
		case <-time.After(10 * time.Second):
			t.Fatal("nothing on the dead-letter topic")
		}
		assert.EqualValues(t, 1, deadLettered.Load())
		checkConservation(t, db, "1", 100)
	})
}

func TestKafkaDownFallbackThenLaterDelivery(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		// Cluster 1 goes down after the first publishes; cluster 2 is where the
		// relay delivers what the fallback stored.
		k1, err := testenv.StartKafka(1, "orders")
		require.NoError(t, err)
		t.Cleanup(k1.Close)
		addActivity(t, db, "1", 100, 1)
		led := newLedger()
		fb := &memFallback{}
		prod1, err := NewProducer(syncProducer(t, k1.ListenAddrs()), "orders")
		require.NoError(t, err)
		sub, err := handoff.NewSubmitter(prod1.Publish, fb.Store, led)
		require.NoError(t, err)
		ctx := context.Background()
		routes := map[handoff.Route]int{}
		submit := func(i int) {
			m := msg(i, "1", num(100+i))
			led.reserve("1", reconcile.Reservation{ID: m.ReservationID})
			r, err := sub.Submit(ctx, m)
			require.NoError(t, err)
			routes[r]++
		}
		for i := 0; i < 5; i++ {
			submit(i)
		}
		testenv.FailProduce(k1) // Kafka down (its ports kept: a closed cluster's may go to a parallel test's)
		for i := 5; i < 10; i++ {
			submit(i)
		}
		assert.Equal(t, map[handoff.Route]int{handoff.RouteKafka: 5, handoff.RouteFallback: 5}, routes)
		assert.Len(t, fb.rows, 5)
		assert.Equal(t, 0, led.releases())

		// Kafka is back (a new cluster); the relay publishes the stored rows,
		// then the consumer turns them into orders.
		brokers2 := testenv.Kafka(t, 1, "orders")
		prod2, err := NewProducer(syncProducer(t, brokers2), "orders")
		require.NoError(t, err)
		for _, m := range fb.rows {
			require.NoError(t, prod2.Publish(ctx, m))
		}
		p, err := order.NewProcessor(db, newGen(t, 1))
		require.NoError(t, err)
		c, err := order.NewConsumer(p, led)
		require.NoError(t, err)
		runGroup(t, brokers2, nil, "g-fb", "orders", newHandler(t, c, WithLinger(time.Millisecond)))
		eventually(t, 20*time.Second, func() bool { return countOrders(t, db, "") == 5 }, "relayed orders")
		for i := 5; i < 10; i++ {
			assert.EqualValues(t, 1, countOrders(t, db, "reservation_id = ?", fmt.Sprintf("r-%d", i)))
		}
		checkConservation(t, db, "1", 100)
	})
}
