package orderkafka

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/seckillkit/seckill/order"
)

// countingAdmin counts the OffsetFetch requests (ListConsumerGroupOffsets).
type countingAdmin struct {
	sarama.ClusterAdmin
	fetches atomic.Int64
}

func (a *countingAdmin) ListConsumerGroupOffsets(group string, parts map[string][]int32) (*sarama.OffsetFetchResponse, error) {
	a.fetches.Add(1)
	return a.ClusterAdmin.ListConsumerGroupOffsets(group, parts)
}

// The positions the producer's acknowledgements record tell, per pass,
// which reservations the group will still deliver: all while it committed
// nothing; those at or after its committed offset once it committed; none
// trimmed by retention (DeleteRecords, which kfake implements). Positions
// of messages passed are pruned from Redis; one OffsetFetch per pass. Run
// on the in-process kfake (exact offsets on a one-partition topic) and
// every Redis of testenv.AllRedis.
func TestPositionsPending(t *testing.T) {
	if os.Getenv(testenv.EnvKafkaBrokers) != "" {
		t.Skip("needs the in-process kfake: exact offsets of a fresh one-partition topic")
	}
	t.Parallel()
	for kind, rdb := range testenv.AllRedis(t) {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			const topic, group, act = "orders", "g-pos", "sale-7"
			brokers := testenv.Kafka(t, 1, topic)
			cfg := testSaramaConfig()
			client, err := sarama.NewClient(brokers, cfg)
			require.NoError(t, err)
			t.Cleanup(func() { _ = client.Close() })
			raw, err := sarama.NewClusterAdminFromClient(client)
			require.NoError(t, err)
			admin := &countingAdmin{ClusterAdmin: raw}
			prefix := fmt.Sprintf("pos-%s-%d:", kind, time.Now().UnixNano())
			pos, err := NewPositions(rdb, admin, client, PositionsConfig{Group: group, Topic: topic, KeyPrefix: prefix})
			require.NoError(t, err)

			var recErr atomic.Value
			prod, err := NewProducer(syncProducer(t, brokers), topic, WithOnAck(func(ctx context.Context, m order.Message, p int32, off int64) {
				if err := pos.Record(ctx, m, p, off); err != nil {
					recErr.Store(err)
				}
			}))
			require.NoError(t, err)
			for i := range 5 {
				require.NoError(t, prod.Publish(ctx, msg(i, act, num(100+i))))
			}
			require.Nil(t, recErr.Load())
			require.NoError(t, pos.flush(ctx)) // Record writes in the background
			key := positionsKey(prefix, act)
			fields, err := rdb.HGetAll(ctx, key).Result()
			require.NoError(t, err)
			require.Equal(t, map[string]string{"r-0": "0:0", "r-1": "0:1", "r-2": "0:2", "r-3": "0:3", "r-4": "0:4"}, fields,
				"each acknowledged message at its partition and offset")

			pendingOf := func() map[string]bool {
				t.Helper()
				before := admin.fetches.Load()
				p, err := pos.Pending(ctx, act)
				require.NoError(t, err)
				out := map[string]bool{}
				for _, id := range []string{"r-0", "r-1", "r-2", "r-3", "r-4", "r-never-recorded"} {
					ok, err := p(ctx, id)
					require.NoError(t, err)
					out[id] = ok
				}
				assert.Equal(t, before+1, admin.fetches.Load(), "one OffsetFetch per pass, not per reservation")
				return out
			}
			all := map[string]bool{"r-0": true, "r-1": true, "r-2": true, "r-3": true, "r-4": true, "r-never-recorded": false}
			assert.Equal(t, all, pendingOf(), "nothing committed: every retained message is deliverable")

			// the group commits offset 2 (r-0 and r-1 consumed)
			coord, err := client.Coordinator(group)
			require.NoError(t, err)
			req := &sarama.OffsetCommitRequest{Version: 2, ConsumerGroup: group, ConsumerGroupGeneration: sarama.GroupGenerationUndefined, RetentionTime: -1}
			req.AddBlock(topic, 0, 2, 0, "")
			resp, err := coord.CommitOffset(req)
			require.NoError(t, err)
			require.Equal(t, sarama.ErrNoError, resp.Errors[topic][0])
			assert.Equal(t, map[string]bool{"r-0": false, "r-1": false, "r-2": true, "r-3": true, "r-4": true, "r-never-recorded": false},
				pendingOf(), "committed 2: the messages before are passed, the rest still deliverable")
			n, err := rdb.HLen(ctx, key).Result()
			require.NoError(t, err)
			assert.EqualValues(t, 3, n, "the positions of passed messages are pruned")

			// retention trims the log up to offset 4
			require.NoError(t, raw.DeleteRecords(topic, map[int32]int64{0: 4}))
			assert.Equal(t, map[string]bool{"r-0": false, "r-1": false, "r-2": false, "r-3": false, "r-4": true, "r-never-recorded": false},
				pendingOf(), "trimmed by retention: no longer deliverable")
			fields, err = rdb.HGetAll(ctx, key).Result()
			require.NoError(t, err)
			assert.Equal(t, map[string]string{"r-4": "0:4"}, fields)

			// a position past the log's end: the log that held it was lost
			lost := msg(7, act, "107")
			require.NoError(t, pos.Record(ctx, lost, 0, 100))
			pend, err := pos.Pending(ctx, act)
			require.NoError(t, err)
			ok, err := pend(ctx, lost.ReservationID)
			require.NoError(t, err)
			assert.False(t, ok, "an offset at or past the high-water mark is not in the log")
			ok, err = pend(ctx, "r-4")
			require.NoError(t, err)
			assert.True(t, ok)
			fields, err = rdb.HGetAll(ctx, key).Result()
			require.NoError(t, err)
			assert.Equal(t, map[string]string{"r-4": "0:4"}, fields)

			// bad input
			assert.ErrorIs(t, pos.Record(ctx, msg(9, "bad{id}", "1"), 0, 1), order.ErrInvalidID)
			assert.ErrorIs(t, pos.Record(ctx, msg(9, act, "1"), 0, -1), order.ErrInvalidMessage)
			_, err = pos.Pending(ctx, "bad{id}")
			assert.ErrorIs(t, err, order.ErrInvalidID)
		})
	}
}

// An empty hash asks Kafka nothing; bad configuration is ErrInvalidConfig.
func TestPositionsConfig(t *testing.T) {
	t.Parallel()
	rdb, _ := testenv.Miniredis(t)
	brokers := testenv.Kafka(t, 1, "orders")
	client, err := sarama.NewClient(brokers, testSaramaConfig())
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })
	raw, err := sarama.NewClusterAdminFromClient(client)
	require.NoError(t, err)
	admin := &countingAdmin{ClusterAdmin: raw}
	for _, c := range []struct {
		rdb redis.UniversalClient
		cfg PositionsConfig
	}{{nil, PositionsConfig{Group: "g", Topic: "t"}}, {rdb, PositionsConfig{Topic: "t"}}, {rdb, PositionsConfig{Group: "g"}}} {
		_, err := NewPositions(c.rdb, admin, client, c.cfg)
		assert.ErrorIs(t, err, ErrInvalidConfig)
	}
	pos, err := NewPositions(rdb, admin, client, PositionsConfig{Group: "g", Topic: "orders"})
	require.NoError(t, err)
	p, err := pos.Pending(context.Background(), "1")
	require.NoError(t, err)
	ok, err := p(context.Background(), "r-1")
	require.NoError(t, err)
	assert.False(t, ok)
	assert.EqualValues(t, 0, admin.fetches.Load(), "no recorded position: Kafka is not asked")
}

// WithOnAck with WithBatching: every message of a batch is reported once,
// at its own offset (sarama sets each message's from the ack).
func TestOnAckBatched(t *testing.T) {
	t.Parallel()
	brokers := testenv.Kafka(t, 1, "orders")
	var mu sync.Mutex
	got := map[string]int64{}
	prod, err := NewProducer(syncProducer(t, brokers), "orders", WithBatching(time.Millisecond, 8),
		WithOnAck(func(_ context.Context, m order.Message, p int32, off int64) {
			mu.Lock()
			defer mu.Unlock()
			_, dup := got[m.ReservationID]
			assert.False(t, dup, "reported twice: %s", m.ReservationID)
			got[m.ReservationID] = off
		}))
	require.NoError(t, err)
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() { assert.NoError(t, prod.Publish(context.Background(), msg(i, "1", num(100+i)))) })
	}
	wg.Wait()
	require.NoError(t, prod.Close())
	require.Len(t, got, 20)
	seen := map[int64]bool{}
	for _, off := range got {
		assert.False(t, seen[off], "offset %d twice", off)
		assert.True(t, off >= 0 && off < 20, "offset %d", off)
		seen[off] = true
	}
}

// blockingHook holds the first pipeline of HSETs until release is closed,
// and counts those pipelines and their HSETs.
type blockingHook struct {
	entered   chan struct{}
	release   chan struct{}
	once      sync.Once
	pipelines atomic.Int64
	hsets     atomic.Int64
}

func (h *blockingHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *blockingHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return next
}
func (h *blockingHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		var n int64
		for _, c := range cmds {
			if c.Name() == "hset" {
				n++
			}
		}
		if n == 0 {
			return next(ctx, cmds) // the connection's handshake
		}
		h.pipelines.Add(1)
		h.hsets.Add(n)
		first := false
		h.once.Do(func() { first = true })
		if first {
			close(h.entered)
			<-h.release
		}
		return next(ctx, cmds)
	}
}

// TestPositionsRecordWritesBehind: Record never waits for Redis, and the
// positions recorded while a batch is being written leave together as the
// next one: 101 positions recorded, one held up in the first write, reach
// Redis in 2 pipelines, not 101 round trips; Pending sees all of them.
func TestPositionsRecordWritesBehind(t *testing.T) {
	ctx := context.Background()
	rdb, _ := testenv.Miniredis(t)
	h := &blockingHook{entered: make(chan struct{}), release: make(chan struct{})}
	rdb.AddHook(h)
	pos := &Positions{rdb: rdb, cfg: PositionsConfig{Group: "g", Topic: "t", KeyPrefix: "wb:"}}
	require.NoError(t, pos.Record(ctx, msg(0, "sale-1", "100"), 0, 0))
	<-h.entered // the first batch is being written, and held there
	for i := 1; i <= 100; i++ {
		require.NoError(t, pos.Record(ctx, msg(i, "sale-1", num(100+i)), 0, int64(i)))
	}
	close(h.release)
	require.NoError(t, pos.flush(ctx))
	n, err := rdb.HLen(ctx, positionsKey("wb:", "sale-1")).Result()
	require.NoError(t, err)
	assert.Equal(t, int64(101), n, "every recorded position stored")
	assert.Equal(t, int64(2), h.pipelines.Load(), "the first position alone, then the 100 gathered behind it")
	assert.Equal(t, int64(2), h.hsets.Load(), "one HSET per activity per batch")
}
