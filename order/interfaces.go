package order

import (
	"context"
	"time"
)

// Releaser gives a reservation back to the Redis stock. It must be
// idempotent by reservation ID (stock.Deductor.Release is); examples/fullstack
// wires it.
type Releaser interface {
	Release(ctx context.Context, activity string, reservationID string) error
}

// ReleaserFunc adapts a function to [Releaser].
type ReleaserFunc func(ctx context.Context, activity string, reservationID string) error

// Release calls f.
func (f ReleaserFunc) Release(ctx context.Context, activity string, reservationID string) error {
	return f(ctx, activity, reservationID)
}

// Notifier is told about every outcome after the DB commit (for SSE or
// WebSocket push). Delivery is at least once: a redelivered message notifies
// again. Notify must not block for long; it runs on the consumer's goroutine.
type Notifier interface {
	Notify(ctx context.Context, r Result)
}

// IDSource hands out unique int64 IDs, each greater than the ones before:
// the order and its number. orderid.Generator (package
// github.com/seckillkit/seckill/order/orderid) implements it, with a
// machine ID leased from Redis (orderid.AcquireMachine) or configured.
type IDSource interface {
	NextID() (int64, error)
}

// Scheduler schedules the unpaid cancellation of a new order at a time;
// status.Canceller implements it.
type Scheduler interface {
	Schedule(ctx context.Context, orderNo string, at time.Time) error
}

// ResultWriter records the user-facing results of purchases (the
// [Consumer]'s SUCCESS and FAILED; handoff's QUEUED, and FAILED after a
// release); status.Results implements it.
type ResultWriter interface {
	SetMany(ctx context.Context, rs []Result) error
}

// Record is one record of the order topic as the [Consumer] needs it,
// without the types of a Kafka client: the value to decode, the headers
// to make the message's context from ([WithContextFrom]), and where it
// came from, for the [DeadLetter] sink and logs. The orderkafka package
// makes Records from sarama messages.
type Record struct {
	Topic     string
	Partition int32
	Offset    int64
	Key       []byte
	Value     []byte
	Headers   map[string]string // nil when the record has none
}

// DeadLetter takes a poison record out of the stream. It must be durable
// when it returns nil: the record then counts as done and its offset is
// marked right after. orderkafka.DeadLetterTopic is the Kafka one.
type DeadLetter interface {
	DeadLetter(ctx context.Context, rec Record, cause error) error
}
