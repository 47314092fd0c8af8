package orderkafka

import (
	"context"
	"fmt"
	"time"

	"github.com/IBM/sarama"

	"github.com/seckillkit/seckill/internal/observe"
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
// (build it with [SaramaConfig]); it never closes it. Its Publish method
// is a handoff.Publisher. With [WithBatching] it gathers concurrent Publish
// calls into one SendMessages call; [Producer.Close] then sends what is
// gathered. Safe for concurrent use.
type Producer struct {
	sp      sarama.SyncProducer
	topic   string
	headers func(ctx context.Context) map[string]string
	obs     observe.Observer
	onAck   func(ctx context.Context, m order.Message, partition int32, offset int64)
	b       *batcher // nil without WithBatching
}

// NewProducer returns a producer writing to topic. Options: [WithHeaders],
// [WithBatching], [WithObserver], [WithOnAck]. A nil sp or an empty topic fails with
// [ErrInvalidConfig].
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
	p := &Producer{sp: sp, topic: topic, headers: o.headers, obs: o.obs, onAck: o.onAck}
	if o.batching {
		maxBatch, err := validBatching(o.linger, o.maxBatch)
		if err != nil {
			return nil, err
		}
		p.b = &batcher{sp: sp, produce: p.produce, linger: o.linger, max: maxBatch}
	}
	return p, nil
}

// Publish encodes m (a zero Version becomes 1, or 2 with an Ext) and sends it
// keyed by user ID, with the headers of [WithHeaders] made from ctx,
// waiting for all in-sync replicas; it returns nil only once the broker
// acknowledged this message. SyncProducer cannot be interrupted: ctx is
// checked before sending, and the send ends within sarama's own timeouts
// and retries. With [WithBatching] the message waits in a batch first: if
// ctx ends before the batch is sent, Publish returns ctx's error and the
// message is never sent; once sent, Publish waits for its own answer
// whatever ctx does. So a context error always means "not sent"; any other
// error means "not acknowledged" (a timed-out send may still have been
// written, which is why handoff.Submitter releases through a fence).
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
	if p.b != nil {
		if c, pb := p.b.enqueue(pm); c != nil {
			select {
			case <-pb.done:
			case <-ctx.Done():
				if c.state.CompareAndSwap(pubWaiting, pubAbandoned) {
					return ctx.Err()
				}
				<-pb.done // sent before the caller gave up: its answer is on its way
			}
			err = c.err
		} else {
			err = p.sendOne(ctx, pm) // closed: one by one
		}
	} else {
		err = p.sendOne(ctx, pm)
	}
	if err != nil {
		return fmt.Errorf("orderkafka: publish %s: %w", m.MsgID, err)
	}
	if p.onAck != nil {
		p.onAck(ctx, m, pm.Partition, pm.Offset) // sarama set them from the acknowledgement
	}
	return nil
}

// sendOne sends pm alone.
func (p *Producer) sendOne(ctx context.Context, pm *sarama.ProducerMessage) error {
	return p.produce(ctx, []*sarama.ProducerMessage{pm}, func() error {
		_, _, err := p.sp.SendMessage(pm)
		return err
	})
}

// produce runs send, one produce call carrying msgs, and reports it to the
// observer with ctx (the caller's for a message sent alone,
// context.Background() for a batch, which has many callers).
func (p *Producer) produce(ctx context.Context, msgs []*sarama.ProducerMessage, send func() error) error {
	if p.obs == nil {
		return send()
	}
	start := time.Now()
	err := send()
	e := observe.Event{Stage: stageProduce, Outcome: observe.OK, Value: float64(len(msgs)), Duration: time.Since(start)}
	if err != nil {
		e.Outcome, e.Err = observe.Error, err
	}
	p.obs.Observe(ctx, e)
	return err
}

// Close sends the messages gathered by [WithBatching] at once and waits
// until every batch sent has its answers; Publish calls after it send one
// by one. Call it before closing the SyncProducer. It never closes the
// SyncProducer and returns nil; without batching it does nothing.
func (p *Producer) Close() error {
	if p.b != nil {
		p.b.close()
	}
	return nil
}

// stageProduce is the stage of the event [WithObserver] reports per
// produce call.
const stageProduce = "orderkafka.produce"

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
