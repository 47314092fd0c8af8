package orderkafka

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/IBM/sarama"

	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/order/handoff"
)

var (
	_ handoff.Publisher = (*Producer)(nil).Publish
	_ order.DeadLetter  = (*DeadLetterTopic)(nil)
)

// runClaim feeds msgs to ConsumeClaim through a fake session and returns
// when the claim returned (the channel is closed after the last message).
func runClaim(t *testing.T, h *Handler, sess *fakeSession, msgs []*sarama.ConsumerMessage) error {
	t.Helper()
	ch := make(chan *sarama.ConsumerMessage, len(msgs))
	for _, m := range msgs {
		ch <- m
	}
	close(ch)
	return h.ConsumeClaim(sess, &fakeClaim{ch: ch})
}

// The handler collects batches of the consumer's batch size, marks the
// last offset of each batch once it is done, carries the record headers
// to the consumer, and dead-letters a poison record as an order.Record.
func TestHandlerBatchesMarksAndRecords(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		addActivity(t, db, "1", 10, 1)
		var mu sync.Mutex
		var dead []order.Record
		var hookTrace []string
		hook := func(ctx context.Context, _ *gorm.DB, orders []order.Order) error {
			mu.Lock()
			defer mu.Unlock()
			for _, o := range orders {
				hookTrace = append(hookTrace, o.Headers["traceparent"])
			}
			return nil
		}
		c, err := order.NewConsumer(newProc(t, db, order.WithTxHook(hook)), newLedger(), order.WithBatchSize(3),
			order.WithDeadLetter(deadLetterFunc(func(_ context.Context, rec order.Record, _ error) error {
				mu.Lock()
				defer mu.Unlock()
				dead = append(dead, rec)
				return nil
			})))
		require.NoError(t, err)
		var kms []*sarama.ConsumerMessage
		for i := 0; i < 7; i++ {
			km := kmsg(t, int64(10+i), msg(i, "1", num(100+i)))
			km.Partition = 2
			for _, h := range recordHeaders(map[string]string{"traceparent": "t" + num(i)}) {
				km.Headers = append(km.Headers, &h)
			}
			kms = append(kms, km)
		}
		kms[4] = &sarama.ConsumerMessage{Topic: "orders", Partition: 2, Offset: 14, Key: []byte("k"), Value: []byte("{garbage")}
		sess := &fakeSession{ctx: context.Background()}
		require.NoError(t, runClaim(t, newHandler(t, c, WithLinger(0)), sess, kms))

		assert.Equal(t, []int64{12, 15, 16}, sess.marks(), "the last offset of each batch of 3")
		assert.EqualValues(t, 6, countOrders(t, db, ""))
		require.Len(t, dead, 1)
		assert.Equal(t, order.Record{Topic: "orders", Partition: 2, Offset: 14, Key: []byte("k"), Value: []byte("{garbage")}, dead[0])
		assert.ElementsMatch(t, []string{"t0", "t1", "t2", "t3", "t5", "t6"}, hookTrace, "each order carries its record's headers")
	})
}

// Without a dead-letter sink a poison record stops the claim with
// order.ErrNoDeadLetter and nothing past it is marked.
func TestHandlerPoisonWithoutSink(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		addActivity(t, db, "1", 10, 1)
		c, err := order.NewConsumer(newProc(t, db), newLedger(), order.WithBatchSize(2))
		require.NoError(t, err)
		sess := &fakeSession{ctx: context.Background()}
		err = runClaim(t, newHandler(t, c, WithLinger(0)), sess, []*sarama.ConsumerMessage{
			kmsg(t, 0, msg(0, "1", "100")), kmsg(t, 1, msg(1, "1", "101")),
			{Topic: "orders", Offset: 2, Value: []byte("{garbage")}, kmsg(t, 3, msg(3, "1", "103")),
		})
		require.ErrorIs(t, err, order.ErrNoDeadLetter)
		assert.Equal(t, []int64{1}, sess.marks(), "the first batch only")
		assert.EqualValues(t, 2, countOrders(t, db, ""))
	})
}

func TestConsumeClaimStopsWithSession(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		c, err := order.NewConsumer(newProc(t, db), newLedger())
		require.NoError(t, err)
		h := newHandler(t, c)
		ctx, cancel := context.WithCancel(context.Background())
		sess := &fakeSession{ctx: ctx}
		done := make(chan error, 1)
		go func() { done <- h.ConsumeClaim(sess, &fakeClaim{ch: make(chan *sarama.ConsumerMessage)}) }()
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(5 * time.Second):
			t.Fatal("ConsumeClaim did not return when the session ended")
		}
	})
}

// Nil collaborators are errors; a nil option is ignored.
func TestConstructorsValidate(t *testing.T) {
	t.Parallel()
	_, err := NewHandler(nil)
	assert.ErrorIs(t, err, ErrInvalidConfig)
	_, err = NewProducer(nil, "orders")
	assert.ErrorIs(t, err, ErrInvalidConfig)
	_, err = NewProducer(fakeProducer{}, "")
	assert.ErrorIs(t, err, ErrInvalidConfig)
	_, err = NewDeadLetterTopic(nil, "orders.dlq")
	assert.ErrorIs(t, err, ErrInvalidConfig)
	_, _, err = ObserveLag(context.Background(), nil, nil, nil, "g", "orders")
	assert.ErrorIs(t, err, ErrInvalidConfig)
	_, _, err = ObserveLag(context.Background(), nil, fakeAdmin{}, fakeClient{}, "", "orders")
	assert.ErrorIs(t, err, ErrInvalidConfig)
	p, err := NewProducer(fakeProducer{}, "orders", nil, ProducerOption(nil), WithHeaders(nil))
	require.NoError(t, err, "a nil option is ignored")
	assert.Nil(t, p.headers)
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		c, err := order.NewConsumer(newProc(t, db), newLedger())
		require.NoError(t, err)
		_, err = NewHandler(c, WithLinger(-time.Millisecond))
		assert.ErrorIs(t, err, ErrInvalidConfig)
		h, err := NewHandler(c, nil, WithLinger(time.Millisecond), HandlerOption(nil))
		require.NoError(t, err, "a nil option is ignored")
		assert.Equal(t, time.Millisecond, h.linger)
	})
}

// fakeProducer is a sarama.SyncProducer whose methods are never called.
type fakeProducer struct{ sarama.SyncProducer }
