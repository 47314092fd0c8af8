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
