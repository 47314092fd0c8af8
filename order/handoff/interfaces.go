package handoff

import (
	"context"

	"github.com/seckillkit/seckill/order"
)

// Publisher sends a message to Kafka; orderkafka.Producer's Publish method
// is the implementation (pass producer.Publish).
type Publisher func(ctx context.Context, m order.Message) error

// Fallback durably stores a message that could not be published (an outbox
// row written in its own transaction); a relay publishes it later.
type Fallback func(ctx context.Context, m order.Message) error
