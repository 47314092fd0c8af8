package outbox

import "context"

// Publisher sends one message to the broker. It returns nil only when the
// broker acknowledged the message. An error means "maybe not delivered":
// the relay will publish the row again later, so a Publisher that failed
// after the broker stored the message causes a duplicate, which consumers
// absorb by deduplicating on [Message.MsgID].
//
// A Publisher used by a [Relay] with [WithPublishConcurrency] > 1 must be
// safe for concurrent use.
type Publisher interface {
	Publish(ctx context.Context, m Message) error
}

// PublisherFunc adapts a function to [Publisher].
type PublisherFunc func(ctx context.Context, m Message) error

// Publish calls f(ctx, m).
func (f PublisherFunc) Publish(ctx context.Context, m Message) error { return f(ctx, m) }

// BatchPublisher is a [Publisher] that can send many messages in one call.
// A relay whose publisher implements it hands it each claimed batch.
// PublishBatch returns nil when every message was acknowledged, otherwise
// a slice with one entry per message (nil for those acknowledged).
type BatchPublisher interface {
	Publisher
	PublishBatch(ctx context.Context, msgs []Message) []error
}

var _ Publisher = PublisherFunc(nil)
