package orderkafka

import (
	"context"
	"errors"
	"fmt"

	"time"

	"github.com/IBM/sarama"

	"github.com/seckillkit/seckill/internal/observe"
	"github.com/seckillkit/seckill/order"
)

// PartitionLag is the lag of one partition: messages written that the
// group has not committed yet.
type PartitionLag struct {
	Partition int32
	HighWater int64 // the next offset the broker will write
	Committed int64 // the next offset the group will read; -1 when none is committed
	Lag       int64 // HighWater − Committed (HighWater when nothing is committed)
}

// lag reads the consumer group's lag (see [ObserveLag]).
func lag(ctx context.Context, admin sarama.ClusterAdmin, client sarama.Client, group, topic string) (total int64, parts []PartitionLag, err error) {
	if admin == nil || client == nil || group == "" || topic == "" {
		return 0, nil, fmt.Errorf("%w: ObserveLag needs an admin, a client, a group and a topic", ErrInvalidConfig)
	}
	ps, err := client.Partitions(topic)
	if err != nil {
		return 0, nil, fmt.Errorf("orderkafka: lag: partitions of %s: %w", topic, err)
	}
	resp, err := admin.ListConsumerGroupOffsets(group, map[string][]int32{topic: ps})
	switch {
	case errors.Is(err, sarama.ErrGroupIDNotFound):
		resp = nil // a group that never committed: every retained message is lag
	case err != nil:
		return 0, nil, fmt.Errorf("orderkafka: lag: offsets of group %s: %w", group, err)
	case resp.Err == sarama.ErrGroupIDNotFound:
		resp = nil
	case resp.Err != sarama.ErrNoError:
		return 0, nil, fmt.Errorf("orderkafka: lag: offsets of group %s: %w", group, resp.Err)
	}
	for _, p := range ps {
		if err := ctx.Err(); err != nil {
			return 0, nil, err
		}
		hw, err := client.GetOffset(topic, p, sarama.OffsetNewest)
		if err != nil {
			return 0, nil, fmt.Errorf("orderkafka: lag: high-water mark of %s/%d: %w", topic, p, err)
		}
		pl := PartitionLag{Partition: p, HighWater: hw, Committed: -1}
		if resp != nil {
			if b := resp.GetBlock(topic, p); b != nil {
				if b.Err != sarama.ErrNoError {
					return 0, nil, fmt.Errorf("orderkafka: lag: offset of %s/%d: %w", topic, p, b.Err)
				}
				pl.Committed = b.Offset
			}
		}
		if pl.Committed < 0 {
			oldest, err := client.GetOffset(topic, p, sarama.OffsetOldest)
			if err != nil {
				return 0, nil, fmt.Errorf("orderkafka: lag: oldest offset of %s/%d: %w", topic, p, err)
			}
			pl.Lag = hw - oldest
		} else {
			pl.Lag = max(hw-pl.Committed, 0)
		}
		total += pl.Lag
		parts = append(parts, pl)
	}
	return total, parts, nil
}

// ObserveLag returns the consumer group's lag on topic, partition by
// partition, and its total: the high-water mark minus the committed
// offset, read with admin (ListConsumerGroupOffsets) and client (the
// partitions and their newest offsets). This is Kafka lag, not in-process
// work: a message counts until the consumer committed its offset, which
// it does only after the message's DB transaction committed. A partition
// on which the group never committed counts every message from the oldest
// retained offset. ctx bounds nothing inside sarama (its calls have their
// own timeouts) but is checked between partitions. A nil admin or client,
// an empty group or topic, is an [ErrInvalidConfig] error.
//
// With a non-nil obs it also reports the lag as the gauge
// order.consumer_lag (Value = total lag, Name = group), or a failure as an
// "error" event, with ctx. A nil obs only reads. Call it on a timer (every
// scrape, every few seconds): the consumer itself does not know the
// high-water marks.
func ObserveLag(ctx context.Context, obs observe.Observer, admin sarama.ClusterAdmin, client sarama.Client, group, topic string) (int64, []PartitionLag, error) {
	start := time.Now()
	total, parts, err := lag(ctx, admin, client, group, topic)
	if obs == nil {
		return total, parts, err
	}
	if err != nil {
		obs.Observe(ctx, observe.Event{Stage: order.StageConsumerLag, Outcome: observe.Error, Name: group, Duration: time.Since(start), Err: err})
	} else {
		obs.Observe(ctx, observe.Event{Stage: order.StageConsumerLag, Outcome: observe.OK, Name: group, Gauge: true, Value: float64(total)})
	}
	return total, parts, err
}
