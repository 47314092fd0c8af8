package reconcile

import (
	"context"
	"time"
)

// Reservation is one entry of the Redis ledger, as the [Reconciler] sees it.
type Reservation struct {
	ID   string
	User string // the buyer's ID ([order.ValidID])
	Qty  int64
	At   time.Time // when it was reserved
}

// Ledger lists the reservations Redis holds for an activity, a page at a
// time: start with cursor 0, stop when next is 0 (HSCAN semantics).
type Ledger func(ctx context.Context, activity string, cursor uint64, count int64) (page []Reservation, next uint64, err error)

// Pending reports whether a reservation still has a message on its way
// (an unsent outbox row, say), so the [Reconciler] must not release it.
type Pending func(ctx context.Context, reservationID string) (bool, error)

// PendingPass is asked once per [Reconciler.Reconcile] of an activity,
// when the first reservation without an order is past the grace, and
// returns the [Pending] of that pass: it reads at once what every answer
// needs (orderkafka.Positions.Pending: the consumer group's committed
// offsets and the recorded positions of the messages).
type PendingPass func(ctx context.Context, activity string) (Pending, error)
