package orderkafka

import (
	"slices"

	"github.com/IBM/sarama"

	"github.com/seckillkit/seckill/order"
)

// recordHeaders turns a header map into sarama record headers, in key
// order (records are compared and logged byte for byte).
func recordHeaders(h map[string]string) []sarama.RecordHeader {
	if len(h) == 0 {
		return nil
	}
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]sarama.RecordHeader, len(keys))
	for i, k := range keys {
		out[i] = sarama.RecordHeader{Key: []byte(k), Value: []byte(h[k])}
	}
	return out
}

// headersOf turns record headers into a map (nil when there are none); of
// a repeated key the last value wins.
func headersOf(hs []*sarama.RecordHeader) map[string]string {
	if len(hs) == 0 {
		return nil
	}
	m := make(map[string]string, len(hs))
	for _, h := range hs {
		if h != nil {
			m[string(h.Key)] = string(h.Value)
		}
	}
	return m
}

// recordOf is the order.Record of a sarama message.
func recordOf(m *sarama.ConsumerMessage) order.Record {
	return order.Record{Topic: m.Topic, Partition: m.Partition, Offset: m.Offset, Key: m.Key, Value: m.Value,
		Headers: headersOf(m.Headers)}
}
