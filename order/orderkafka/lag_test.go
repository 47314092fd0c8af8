package orderkafka

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/seckillkit/seckill/internal/observe"
	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/seckillkit/seckill/order"
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
		total, parts, err := ObserveLag(ctx, nil, admin, client, "g-lag", "orders")
		require.NoError(t, err)
		assert.EqualValues(t, n, total, "nothing committed: every message is lag")
		require.Len(t, parts, 3)
		var sum int64
		for _, p := range parts {
			assert.EqualValues(t, -1, p.Committed)
			sum += p.HighWater
		}
		assert.EqualValues(t, n, sum)

		p, err := order.NewProcessor(db, newGen(t, 1))
		require.NoError(t, err)
		c, err := order.NewConsumer(p, newLedger())
		require.NoError(t, err)
		runGroup(t, brokers, nil, "g-lag", "orders", newHandler(t, c, WithLinger(time.Millisecond)))
		eventually(t, 30*time.Second, func() bool {
			total, _, err := ObserveLag(ctx, nil, admin, client, "g-lag", "orders")
			return err == nil && total == 0
		}, "lag 0 once every offset is committed")
		assert.EqualValues(t, n, countOrders(t, db, ""), "lag 0 means every message is in the DB")

		_, _, err = ObserveLag(ctx, nil, nil, client, "g", "orders")
		require.Error(t, err)
	})
}

// fakeAdmin and fakeClient answer ObserveLag's calls from fixed offsets;
// the other methods of the sarama interfaces they embed are never called.
type fakeAdmin struct {
	sarama.ClusterAdmin
	committed int64
}

type fakeClient struct {
	sarama.Client
	high int64
}

func (f fakeAdmin) ListConsumerGroupOffsets(group string, tp map[string][]int32) (*sarama.OffsetFetchResponse, error) {
	r := &sarama.OffsetFetchResponse{}
	for topic, ps := range tp {
		for _, p := range ps {
			r.AddBlock(topic, p, &sarama.OffsetFetchResponseBlock{Offset: f.committed})
		}
	}
	return r, nil
}
func (f fakeClient) Partitions(string) ([]int32, error) { return []int32{0, 1}, nil }
func (f fakeClient) GetOffset(string, int32, int64) (int64, error) {
	if f.high < 0 {
		return 0, errors.New("broker down")
	}
	return f.high, nil
}

func TestObserveLag(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	total, _, err := ObserveLag(context.Background(), rec, fakeAdmin{committed: 4}, fakeClient{high: 10}, "g", "orders")
	require.NoError(t, err)
	assert.EqualValues(t, 12, total)
	assert.Equal(t, []observe.Event{{Stage: order.StageConsumerLag, Outcome: "ok", Name: "g", Gauge: true, Value: 12}}, rec.of(order.StageConsumerLag))
	_, _, err = ObserveLag(context.Background(), rec, fakeAdmin{}, fakeClient{high: -1}, "g", "orders")
	require.Error(t, err)
	evs := rec.of(order.StageConsumerLag)
	require.Len(t, evs, 2)
	assert.Equal(t, "error", evs[1].Outcome)
	assert.False(t, evs[1].Gauge)
	_, _, err = ObserveLag(context.Background(), nil, fakeAdmin{committed: 4}, fakeClient{high: 10}, "g", "orders")
	require.NoError(t, err, "a nil observer only reads")
}

// recorder is an observe.Observer that keeps every event.
type recorder struct {
	mu     sync.Mutex
	events []observe.Event
}

func (r *recorder) Observe(_ context.Context, e observe.Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

// of returns the events of stage.
func (r *recorder) of(stage string) []observe.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []observe.Event
	for _, e := range r.events {
		if e.Stage == stage {
			out = append(out, e)
		}
	}
	return out
}
