package orderkafka

import (
	"context"
	"fmt"
	"time"

	"github.com/IBM/sarama"

	"github.com/seckillkit/seckill/order"
)

// SaramaConfig returns the safe sarama configuration for order messages:
//
//   - producer: RequiredAcks = WaitForAll, Idempotent = true,
//     Net.MaxOpenRequests = 1 (required by idempotence, keeps per-partition
//     order across retries), Return.Successes and Return.Errors on (the
//     SyncProducer needs them), hash partitioner on the key (the user ID);
//   - consumer: Offsets.Initial = OffsetOldest, Return.Errors on, and
//     auto-commit of MARKED offsets every second — the [Handler] marks a
//     message only after its DB transaction committed, so auto-commit never
//     commits unprocessed work, and never calls the synchronous
//     session.Commit in the message loop (which stalls behind the fetch
//     long-poll);
//   - Version = V2_1_0_0 (idempotence needs ≥ 0.11).
//
// Adjust timeouts and the client ID on the returned value as needed.
func SaramaConfig() *sarama.Config {
	c := sarama.NewConfig()
	c.Version = sarama.V2_1_0_0
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Producer.Idempotent = true
	c.Net.MaxOpenRequests = 1
	c.Producer.Return.Successes = true
	c.Producer.Return.Errors = true
	c.Producer.Retry.Max = 5
	c.Producer.Partitioner = sarama.NewHashPartitioner
	c.Consumer.Return.Errors = true
	c.Consumer.Offsets.Initial = sarama.OffsetOldest
	c.Consumer.Offsets.AutoCommit.Enable = true
	c.Consumer.Offsets.AutoCommit.Interval = time.Second
	return c
}

// Producer publishes order messages through a borrowed sarama.SyncProducer
// (build it with [SaramaConfig]); it never closes it. It is an
// handoff.Publisher. Safe for concurrent use.
type Producer struct {
	sp      sarama.SyncProducer
	topic   string
	headers func(ctx context.Context) map[string]string
}

// NewProducer returns a producer writing to topic. Options: [WithHeaders].
// A nil sp or an empty topic fails with [ErrInvalidConfig].
func NewProducer(sp sarama.SyncProducer, topic string, opts ...ProducerOption) (*Producer, error) {
	if sp == nil || topic == "" {
		return nil, fmt.Errorf("%w: NewProducer needs a producer and a topic", ErrInvalidConfig)
	}
	var o producerOptions
	for _, opt := range opts {
		if opt != nil {
			opt.applyProducer(&o)
		}
	}
	return &Producer{sp: sp, topic: topic, headers: o.headers}, nil
}

// Publish encodes m (a zero Version becomes 1, or 2 with an Ext) and sends it
// keyed by user ID, with the headers of [WithHeaders] made from ctx,
// waiting for all in-sync replicas. SyncProducer cannot be
// interrupted: ctx is checked before sending, and the send ends within
// sarama's own timeouts and retries — so a failure returned here really is a
// failure, not a message that may still go out later.
func (p *Producer) Publish(ctx context.Context, m order.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b, err := m.Encode()
	if err != nil {
		return err
	}
	pm := &sarama.ProducerMessage{Topic: p.topic, Key: sarama.StringEncoder(m.Key()), Value: sarama.ByteEncoder(b)}
	if p.headers != nil {
		pm.Headers = recordHeaders(p.headers(ctx))
	}
	_, _, err = p.sp.SendMessage(pm)
	if err != nil {
		return fmt.Errorf("orderkafka: publish %s: %w", m.MsgID, err)
	}
	return nil
}

// DeadLetterTopic is an order.DeadLetter: it sends poison records to a
// Kafka topic with the original key and value and headers x-error,
// x-topic, x-partition, x-offset.
type DeadLetterTopic struct {
	sp    sarama.SyncProducer
	topic string
}

// NewDeadLetterTopic returns a dead-letter sink writing to topic through
// sp. A nil sp or an empty topic fails with [ErrInvalidConfig].
func NewDeadLetterTopic(sp sarama.SyncProducer, topic string) (*DeadLetterTopic, error) {
	if sp == nil || topic == "" {
		return nil, fmt.Errorf("%w: NewDeadLetterTopic needs a producer and a topic", ErrInvalidConfig)
	}
	return &DeadLetterTopic{sp: sp, topic: topic}, nil
}

// DeadLetter implements order.DeadLetter.
func (d *DeadLetterTopic) DeadLetter(ctx context.Context, msg order.Record, cause error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	reason := "unknown"
	if cause != nil {
		reason = cause.Error()
	}
	pm := &sarama.ProducerMessage{Topic: d.topic, Value: sarama.ByteEncoder(msg.Value), Headers: []sarama.RecordHeader{
		{Key: []byte("x-error"), Value: []byte(reason)},
		{Key: []byte("x-topic"), Value: []byte(msg.Topic)},
		{Key: []byte("x-partition"), Value: fmt.Appendf(nil, "%d", msg.Partition)},
		{Key: []byte("x-offset"), Value: fmt.Appendf(nil, "%d", msg.Offset)},
	}}
	if msg.Key != nil {
		pm.Key = sarama.ByteEncoder(msg.Key)
	}
	if _, _, err := d.sp.SendMessage(pm); err != nil {
		return fmt.Errorf("orderkafka: dead-letter %s/%d/%d: %w", msg.Topic, msg.Partition, msg.Offset, err)
	}
	return nil
}
