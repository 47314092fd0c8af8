package outbox

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/IBM/sarama"
)

// HeaderMsgID is the Kafka record header in which [SaramaPublisher] sends
// [Message.MsgID], the ID consumers deduplicate on.
const HeaderMsgID = "outbox-msg-id"

// SaramaPublisher publishes through a borrowed [sarama.SyncProducer]: the
// message's Topic, Key (as a string key, so Kafka partitions by it),
// Payload, Headers plus [HeaderMsgID]. It implements [BatchPublisher] with
// SendMessages, which is how a relay reaches Kafka's throughput. It never
// closes the producer. For seckill, configure the producer with
// RequiredAcks = WaitForAll, Idempotent = true, Net.MaxOpenRequests = 1.
//
// SyncProducer calls take no context: ctx is checked before sending only.
type SaramaPublisher struct {
	p sarama.SyncProducer
}

// NewSaramaPublisher wraps p; a nil producer fails with [ErrInvalidConfig].
func NewSaramaPublisher(p sarama.SyncProducer) (*SaramaPublisher, error) {
	if isNil(p) {
		return nil, fmt.Errorf("%w: nil sarama producer", ErrInvalidConfig)
	}
	return &SaramaPublisher{p: p}, nil
}

var _ BatchPublisher = (*SaramaPublisher)(nil)

// producerMessage converts m to the record SaramaPublisher sends.
func producerMessage(m Message) *sarama.ProducerMessage {
	pm := &sarama.ProducerMessage{Topic: m.Topic, Value: sarama.ByteEncoder(m.Payload)}
	if m.Key != "" {
		pm.Key = sarama.StringEncoder(m.Key)
	}
	keys := make([]string, 0, len(m.Headers))
	for k := range m.Headers {
		if k != HeaderMsgID {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	pm.Headers = make([]sarama.RecordHeader, 0, len(keys)+1)
	pm.Headers = append(pm.Headers, sarama.RecordHeader{Key: []byte(HeaderMsgID), Value: []byte(m.MsgID)})
	for _, k := range keys {
		pm.Headers = append(pm.Headers, sarama.RecordHeader{Key: []byte(k), Value: []byte(m.Headers[k])})
	}
	return pm
}

// Publish sends one message and waits for the broker's acknowledgement.
func (s *SaramaPublisher) Publish(ctx context.Context, m Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if _, _, err := s.p.SendMessage(producerMessage(m)); err != nil {
		return fmt.Errorf("outbox: kafka send %s: %w", m.Topic, err)
	}
	return nil
}

// PublishBatch sends all messages with one SendMessages call.
func (s *SaramaPublisher) PublishBatch(ctx context.Context, msgs []Message) []error {
	if err := ctx.Err(); err != nil {
		return fillErr(len(msgs), err)
	}
	pms := make([]*sarama.ProducerMessage, len(msgs))
	for i, m := range msgs {
		pms[i] = producerMessage(m)
		pms[i].Metadata = i
	}
	err := s.p.SendMessages(pms)
	if err == nil {
		return nil
	}
	var perrs sarama.ProducerErrors
	if !errors.As(err, &perrs) {
		return fillErr(len(msgs), fmt.Errorf("outbox: kafka send batch: %w", err))
	}
	out := make([]error, len(msgs))
	mapped := 0
	for _, pe := range perrs {
		if pe == nil || pe.Msg == nil {
			continue
		}
		if i, ok := pe.Msg.Metadata.(int); ok && i >= 0 && i < len(out) {
			out[i] = fmt.Errorf("outbox: kafka send %s: %w", msgs[i].Topic, pe.Err)
			mapped++
		}
	}
	if mapped < len(perrs) { // cannot tell which failed: retry all (duplicates, not losses)
		return fillErr(len(msgs), fmt.Errorf("outbox: kafka send batch: %w", err))
	}
	return out
}

func fillErr(n int, err error) []error {
	out := make([]error, n)
	for i := range out {
		out[i] = err
	}
	return out
}
