package outbox

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

// safeProducerConfig is the seckill producer configuration (the settings of
// orderkafka.SaramaConfig: acks=all, idempotent, one open request), with short
// retries so a dead cluster fails fast in tests.
func safeProducerConfig() *sarama.Config {
	c := sarama.NewConfig()
	c.Version = sarama.V2_1_0_0
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Producer.Idempotent = true
	c.Net.MaxOpenRequests = 1
	c.Producer.Return.Successes = true
	c.Producer.Return.Errors = true
	c.Producer.Retry.Max = 2
	c.Producer.Retry.Backoff = 20 * time.Millisecond
	c.Metadata.Retry.Max = 1
	c.Metadata.Retry.Backoff = 20 * time.Millisecond
	c.Net.DialTimeout = time.Second
	c.Net.ReadTimeout = 2 * time.Second
	c.Net.WriteTimeout = 2 * time.Second
	return c
}

func newProducer(t testing.TB, brokers []string) sarama.SyncProducer {
	t.Helper()
	p, err := sarama.NewSyncProducer(brokers, safeProducerConfig())
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// consumeAll reads n records from every partition of topic.
func consumeAll(t *testing.T, brokers []string, topic string, n int) []*sarama.ConsumerMessage {
	t.Helper()
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_1_0_0
	client, err := sarama.NewClient(brokers, cfg)
	require.NoError(t, err)
	defer client.Close()
	consumer, err := sarama.NewConsumerFromClient(client)
	require.NoError(t, err)
	defer consumer.Close()
	parts, err := client.Partitions(topic)
	require.NoError(t, err)
	out := make(chan *sarama.ConsumerMessage, n+16)
	for _, p := range parts {
		pc, err := consumer.ConsumePartition(topic, p, sarama.OffsetOldest)
		require.NoError(t, err)
		defer pc.Close()
		go func() {
			for m := range pc.Messages() {
				out <- m
			}
		}()
	}
	var got []*sarama.ConsumerMessage
	timeout := time.After(20 * time.Second)
	for len(got) < n {
		select {
		case m := <-out:
			got = append(got, m)
		case <-timeout:
			t.Fatalf("consumed %d of %d records", len(got), n)
		}
	}
	// Nothing more arrives (no duplicate from the happy path).
	select {
	case m := <-out:
		t.Fatalf("unexpected extra record %s", m.Value)
	case <-time.After(300 * time.Millisecond):
	}
	return got
}

func header(m *sarama.ConsumerMessage, k string) string {
	for _, h := range m.Headers {
		if string(h.Key) == k {
			return string(h.Value)
		}
	}
	return ""
}

// Kafka down → SendOrStore stores → Kafka back → the relay delivers, over
// a real sarama idempotent SyncProducer and a real Kafka protocol server.
func TestKafkaDownOutboxThenRelayDelivers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	topic := "outbox-" + NewMsgID()[:8]
	eachDB(t, func(t *testing.T, kind testenv.DBKind, db *gorm.DB) {
		w, err := NewWriter()
		require.NoError(t, err)

		// A cluster that dies after the producer connected.
		dead, err := testenv.StartKafka(1, topic)
		require.NoError(t, err)
		t.Cleanup(dead.Close)
		downProd, err := sarama.NewSyncProducer(dead.ListenAddrs(), safeProducerConfig())
		require.NoError(t, err)
		testenv.FailProduce(dead) // down, its ports kept (a closed cluster's may go to a parallel test's)
		downPub, err := NewSaramaPublisher(downProd)
		require.NoError(t, err)

		want := map[string]Message{}
		for i := range 4 {
			m := Message{Topic: topic, Key: fmt.Sprintf("user-%d", i), ReservationID: fmt.Sprintf("resv-%d", i),
				Payload: []byte(fmt.Sprintf(`{"n":%d}`, i)), Headers: map[string]string{"v": "1"}}
			res, err := w.SendOrStore(ctx, db, downPub, m)
			require.NoError(t, err)
			require.Equal(t, Stored, res.Delivery, "kafka is down")
			require.Error(t, res.PublishErr)
			m.MsgID = res.MsgID
			want[m.MsgID] = m
			pending, err := HasPendingReservation(ctx, db, m.ReservationID)
			require.NoError(t, err)
			assert.True(t, pending)
		}
		_ = downProd.Close()
		bl, err := Stats(ctx, db)
		require.NoError(t, err)
		assert.EqualValues(t, 4, bl.Pending)

		// Kafka is back.
		brokers := testenv.Kafka(t, 1, topic)
		pub, err := NewSaramaPublisher(newProducer(t, brokers))
		require.NoError(t, err)

		// The direct path works again and writes nothing.
		live := Message{Topic: topic, Key: "user-live", Payload: []byte(`{"n":"live"}`)}
		res, err := w.SendOrStore(ctx, db, pub, live)
		require.NoError(t, err)
		require.Equal(t, Published, res.Delivery)
		live.MsgID = res.MsgID
		want[live.MsgID] = live

		var sent []string
		r, err := NewRelay(db, pub, WithOnSent(func(_ context.Context, m Message) { sent = append(sent, m.MsgID) }))
		require.NoError(t, err)
		b, err := r.RunOnce(ctx)
		require.NoError(t, err)
		assert.Equal(t, Batch{Claimed: 4, Sent: 4}, b)
		assert.Len(t, sent, 4)
		bl, err = Stats(ctx, db)
		require.NoError(t, err)
		assert.Equal(t, Backlog{}, bl)

		got := consumeAll(t, brokers, topic, len(want))
		var ids []string
		for _, rec := range got {
			id := header(rec, HeaderMsgID)
			ids = append(ids, id)
			m, ok := want[id]
			require.True(t, ok, "unknown msg id %q", id)
			assert.Equal(t, m.Key, string(rec.Key))
			assert.Equal(t, m.Payload, rec.Value)
			assert.Equal(t, m.Headers["v"], header(rec, "v"))
		}
		sort.Strings(ids)
		assert.Len(t, ids, len(want))
		for i := 1; i < len(ids); i++ {
			assert.NotEqual(t, ids[i-1], ids[i], "duplicate record")
		}
	})
}

// Single-message Publish and per-message errors of PublishBatch.
func TestSaramaPublisher(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, err := NewSaramaPublisher(nil)
	require.ErrorIs(t, err, ErrInvalidConfig)

	topic := "outbox-" + NewMsgID()[:8]
	brokers := testenv.Kafka(t, 1, topic)
	pub, err := NewSaramaPublisher(newProducer(t, brokers))
	require.NoError(t, err)
	require.NoError(t, pub.Publish(ctx, Message{Topic: topic, MsgID: "one", Payload: []byte("1")}))

	// A record over the producer's size limit fails alone in its batch.
	big := make([]byte, 2<<20)
	errs := pub.PublishBatch(ctx, []Message{
		{Topic: topic, MsgID: "two", Payload: []byte("2")},
		{Topic: topic, MsgID: "big", Payload: big},
		{Topic: topic, MsgID: "three", Payload: []byte("3")},
	})
	require.Len(t, errs, 3)
	assert.NoError(t, errs[0])
	assert.Error(t, errs[1])
	assert.NoError(t, errs[2])

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	assert.ErrorIs(t, pub.Publish(cctx, Message{Topic: topic}), context.Canceled)
	for _, e := range pub.PublishBatch(cctx, make([]Message, 2)) {
		assert.ErrorIs(t, e, context.Canceled)
	}

	got := consumeAll(t, brokers, topic, 3)
	var vals []string
	for _, m := range got {
		vals = append(vals, header(m, HeaderMsgID))
	}
	sort.Strings(vals)
	assert.Equal(t, []string{"one", "three", "two"}, vals)

	pm := producerMessage(Message{Topic: "t", MsgID: "id", Headers: map[string]string{"b": "2", "a": "1", HeaderMsgID: "spoof"}})
	assert.Nil(t, pm.Key, "empty key: broker picks the partition")
	require.Len(t, pm.Headers, 3)
	assert.Equal(t, "id", string(pm.Headers[0].Value))
	assert.Equal(t, "a", string(pm.Headers[1].Key))
}

// partialErrProducer fails a batch with ProducerErrors, one of which cannot
// be mapped back to its message.
type partialErrProducer struct{ sarama.SyncProducer }

func (partialErrProducer) SendMessages(pms []*sarama.ProducerMessage) error {
	return sarama.ProducerErrors{
		{Msg: pms[0], Err: errors.New("leader gone")},
		{Msg: nil, Err: errors.New("unknown message")},
	}
}

// An unmapped ProducerError must not let the other messages pass as sent.
func TestSaramaPublishBatchUnmappedErrorRetriesAll(t *testing.T) {
	t.Parallel()
	pub, err := NewSaramaPublisher(partialErrProducer{})
	require.NoError(t, err)
	errs := pub.PublishBatch(context.Background(), []Message{{Topic: "t"}, {Topic: "t"}, {Topic: "t"}})
	require.Len(t, errs, 3)
	for i, e := range errs {
		assert.Error(t, e, "message %d", i)
	}
}
