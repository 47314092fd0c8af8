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

// OrderReleaser is an optional interface of a [Releaser]: the [Canceller]
// calls ReleaseOrder, with the cancelled order, instead of Release, so the
// releaser knows the reservation was made (by o.CreatedAt) and can tell a
// reservation Redis lost from one never made (stock.Deductor's
// ReleaseReserved). An error makes the Canceller retry the release later
// ([ErrReleasePending]).
type OrderReleaser interface {
	ReleaseOrder(ctx context.Context, o Order) error
}

// ReleaserFunc adapts a function to [Releaser].
type ReleaserFunc func(ctx context.Context, activity string, reservationID string) error

// Release calls f.
func (f ReleaserFunc) Release(ctx context.Context, activity string, reservationID string) error {
	return f(ctx, activity, reservationID)
}

// Publisher sends a message to Kafka; orderkafka.Producer is the
// implementation.
type Publisher interface {
	Publish(ctx context.Context, m Message) error
}

// PublisherFunc adapts a function to [Publisher].
type PublisherFunc func(ctx context.Context, m Message) error

// Publish calls f.
func (f PublisherFunc) Publish(ctx context.Context, m Message) error { return f(ctx, m) }

// Fallback durably stores a message that could not be published (an outbox
// row written in its own transaction); a relay publishes it later.
type Fallback interface {
	Store(ctx context.Context, m Message) error
}

// FallbackFunc adapts a function to [Fallback].
type FallbackFunc func(ctx context.Context, m Message) error

// Store calls f.
func (f FallbackFunc) Store(ctx context.Context, m Message) error { return f(ctx, m) }

// Notifier is told about every outcome after the DB commit (for SSE or
// WebSocket push). Delivery is at least once: a redelivered message notifies
// again. Notify must not block for long; it runs on the consumer's goroutine.
type Notifier interface {
	Notify(ctx context.Context, r Result)
}

// NotifierFunc adapts a function to [Notifier].
type NotifierFunc func(ctx context.Context, r Result)

// Notify calls f.
func (f NotifierFunc) Notify(ctx context.Context, r Result) { f(ctx, r) }

// Scheduler schedules the unpaid cancellation of a new order at a time;
// [Canceller] implements it.
type Scheduler interface {
	Schedule(ctx context.Context, orderNo string, at time.Time) error
}

// SchedulerFunc adapts a function to [Scheduler].
type SchedulerFunc func(ctx context.Context, orderNo string, at time.Time) error

// Schedule calls f.
func (f SchedulerFunc) Schedule(ctx context.Context, orderNo string, at time.Time) error {
	return f(ctx, orderNo, at)
}

// Reservation is one entry of the Redis ledger, as the [Reconciler] sees it.
type Reservation struct {
	ID   string
	User string // the buyer's ID ([ValidID])
	Qty  int64
	At   time.Time // when it was reserved
}

// Ledger lists the reservations Redis holds for an activity, a page at a
// time: start with cursor 0, stop when next is 0 (HSCAN semantics).
type Ledger interface {
	Reservations(ctx context.Context, activity string, cursor uint64, count int64) (page []Reservation, next uint64, err error)
}

// LedgerFunc adapts a function to [Ledger].
type LedgerFunc func(ctx context.Context, activity string, cursor uint64, count int64) ([]Reservation, uint64, error)

// Reservations calls f.
func (f LedgerFunc) Reservations(ctx context.Context, activity string, cursor uint64, count int64) ([]Reservation, uint64, error) {
	return f(ctx, activity, cursor, count)
}

// Pending reports whether a reservation still has a message on its way
// (an unsent outbox row, say), so the [Reconciler] must not release it.
type Pending interface {
	Pending(ctx context.Context, reservationID string) (bool, error)
}

// PendingFunc adapts a function to [Pending].
type PendingFunc func(ctx context.Context, reservationID string) (bool, error)

// Pending calls f.
func (f PendingFunc) Pending(ctx context.Context, reservationID string) (bool, error) {
	return f(ctx, reservationID)
}

// IDSource hands out unique int64 IDs, each greater than the ones before:
// the order and its number. orderid.Generator (package
// github.com/seckillkit/seckill/order/orderid) implements it, with a
// machine ID leased from Redis (orderid.AcquireMachine) or configured.
type IDSource interface {
	NextID() (int64, error)
}
