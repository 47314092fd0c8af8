package order

import (
	"context"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/seckillkit/seckill/internal/testenv"
)

// Lag counts what the group has not committed, per partition, on a real
// wire-protocol broker: every message before the consumer runs, none after
// it committed them all.
func TestLagIsHighWaterMinusCommitted(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		brokers := testenv.Kafka(t, 3, "orders")
		cfg := testSaramaConfig()
		client, err := sarama.NewClient(brokers, cfg)
		require.NoError(t, err)
		t.Cleanup(func() { _ = client.Close() })
		admin, err := sarama.NewClusterAdminFromClient(client)
		require.NoError(t, err)

		addActivity(t, db, "1", 100, 1)
		prod, err := NewProducer(syncProducer(t, brokers), "orders")
		require.NoError(t, err)
		const n = 30
		for i := 0; i < n; i++ {
			require.NoError(t, prod.Publish(ctx, msg(i, "1", num(100+i))))
		}
		require.NoError(t, client.RefreshMetadata("orders"))
		total, parts, err := Lag(ctx, admin, client, "g-lag", "orders")
		require.NoError(t, err)
		assert.EqualValues(t, n, total, "nothing committed: every message is lag")
		require.Len(t, parts, 3)
		var sum int64
		for _, p := range parts {
			assert.EqualValues(t, -1, p.Committed)
			sum += p.HighWater
		}
		assert.EqualValues(t, n, sum)

		p, err := NewProcessor(db, newGen(t, 1))
		require.NoError(t, err)
		c, err := NewConsumer(p, newLedger(), WithLinger(time.Millisecond))
		require.NoError(t, err)
		runGroup(t, brokers, nil, "g-lag", "orders", c)
		eventually(t, 30*time.Second, func() bool {
			total, _, err := Lag(ctx, admin, client, "g-lag", "orders")
			return err == nil && total == 0
		}, "lag 0 once every offset is committed")
		assert.EqualValues(t, n, countOrders(t, db, ""), "lag 0 means every message is in the DB")

		_, _, err = Lag(ctx, nil, client, "g", "orders")
		require.Error(t, err)
	})
}

func TestLiveReservations(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		addActivity(t, db, "1", 10, 1)
		p, err := NewProcessor(db, newGen(t, 1))
		require.NoError(t, err)
		for i := 0; i < 4; i++ {
			_, err := p.Handle(ctx, msg(i, "1", num(10+i)))
			require.NoError(t, err)
		}
		require.NoError(t, db.Exec("UPDATE seckill_order SET status = ?, live_slot = NULL WHERE reservation_id = ?", OrderCancelled, "r-1").Error)
		require.NoError(t, db.Exec("UPDATE seckill_order SET status = ? WHERE reservation_id = ?", OrderPaid, "r-2").Error)
		live, err := LiveReservations(ctx, db, "1")
		require.NoError(t, err)
		ids := map[string]string{}
		for _, r := range live {
			ids[r.ID] = r.User
			assert.EqualValues(t, 1, r.Qty)
		}
		assert.Equal(t, map[string]string{"r-0": "10", "r-2": "12", "r-3": "13"}, ids, "created and paid, not cancelled")
	})
}
