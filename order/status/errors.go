package status

import (
	"errors"

	"github.com/seckillkit/seckill/internal/lifecycle"
)

// Sentinel errors. The refusals of Pay and Cancel are reported with these
// sentinels so callers can branch with errors.Is; infrastructure failures
// are wrapped with an "order: ..." prefix and %w. Bad configuration wraps
// order.ErrInvalidConfig.
var (
	// ErrOrderNotFound is returned by Pay and Cancel for an unknown order number.
	ErrOrderNotFound = errors.New("order: order not found")

	// ErrAlreadyPaid is returned by Pay when the order was already paid (a
	// retry; callers may treat it as success) and by Cancel when the order
	// is paid and can no longer be cancelled.
	ErrAlreadyPaid = errors.New("order: order already paid")

	// ErrAlreadyCancelled is returned by Cancel when the order was already
	// cancelled (a retry; the reservation release is re-issued idempotently).
	ErrAlreadyCancelled = errors.New("order: order already cancelled")

	// ErrReleasePending is returned (joined with the cause) by
	// [Canceller.Cancel] when the order is cancelled in the DB but the Redis
	// reservation could not be released yet: call Cancel again (the delay
	// queue does) or let the reconcile.Reconciler settle it. Likewise by
	// [Canceller.Refund] with [RestockSale]: refunded and restocked in the
	// DB, the Redis reservation not yet released; call Refund again.
	ErrReleasePending = errors.New("order: cancelled, reservation release pending")

	// ErrOrderCancelled is returned by Pay when the order was cancelled
	// (explicitly or because its payment window expired). The refund hook
	// ([WithOnPayCancelled]) has been called: the payment must be refunded.
	ErrOrderCancelled = errors.New("order: order cancelled, payment must be refunded")

	// ErrPaymentConflict is returned by [Canceller.PayRef] for a payment
	// of an order that another payment (another reference) already paid:
	// the second payment is recorded and handed to the conflict hook
	// ([WithOnPayConflict]), and must be refunded. Also for a reference
	// already recorded for another order.
	ErrPaymentConflict = errors.New("order: order paid by another payment, payment must be refunded")

	// ErrAlreadyRefunded is returned by [Canceller.Refund] when the order
	// was refunded before (a retry: the restock to the sale, if that was the
	// choice, is re-issued idempotently), and by Cancel for a refunded order.
	ErrAlreadyRefunded = errors.New("order: order already refunded")

	// ErrNotPaid is returned by [Canceller.Refund] for an order that is
	// not paid yet (CREATED): cancel it instead.
	ErrNotPaid = errors.New("order: order not paid")

	// ErrBadReply reports a Redis reply of an unexpected shape.
	ErrBadReply = errors.New("order: unexpected reply from redis")

	// ErrClosed is returned by Run after Close; ErrRunning (wrapped, with
	// the loop's name) by a Run while another Run of the same part is
	// active. They are the sentinels every seckill package shares for this
	// (stock.ErrClosed, outbox.ErrClosed, … are the same value).
	ErrClosed  = lifecycle.ErrClosed
	ErrRunning = lifecycle.ErrRunning
)
