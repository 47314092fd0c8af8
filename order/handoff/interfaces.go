package handoff

import (
	"context"

	"github.com/seckillkit/seckill/order"
)

// Publisher sends a message to Kafka; orderkafka.Producer is the
// implementation.
type Publisher interface {
	Publish(ctx context.Context, m order.Message) error
}

// PublisherFunc adapts a function to [Publisher].
type PublisherFunc func(ctx context.Context, m order.Message) error

// Publish calls f.
func (f PublisherFunc) Publish(ctx context.Context, m order.Message) error { return f(ctx, m) }

// Fallback durably stores a message that could not be published (an outbox
// row written in its own transaction); a relay publishes it later.
type Fallback interface {
	Store(ctx context.Context, m order.Message) error
}

// FallbackFunc adapts a function to [Fallback].
type FallbackFunc func(ctx context.Context, m order.Message) error

// Store calls f.
func (f FallbackFunc) Store(ctx context.Context, m order.Message) error { return f(ctx, m) }
