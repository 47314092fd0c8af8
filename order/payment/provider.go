package payment

import (
	"context"
	"fmt"

	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/order/status"
)

// Provider is the shop's payment provider, for sales that authorize the
// buyer's card when the unit is reserved and capture it only once the
// order stands (a draw's winners, say). The shop implements it over its
// provider's API. Each call carries an idempotency key derived from the
// reservation ID — "authorize:<id>", "capture:<id>", "void:<id>" — so a
// call repeated with its key (a retry after a failure or a timeout whose
// effect happened) must answer as the first did, and do nothing twice.
//
// Void gives back an authorization that was not captured. The [Flow]
// captures only after the order is PAID and voids only after a release or
// a cancellation, which a PAID order never gets, so for one reservation
// the provider sees captures or voids, never both; should Void meet an
// authorization already captured, it must change nothing and return nil
// (money taken is given back by a refund: status.Canceller.Refund), and
// so must a Void of a reservation never authorized (an authorization
// that failed, a sale without one).
type Provider interface {
	Authorize(ctx context.Context, key string, a Authorization) error
	Capture(ctx context.Context, key string, a Authorization) error
	Void(ctx context.Context, key string, a Authorization) error
}

// Authorization is what a [Provider] call is about: the reservation, its
// buyer and activity, and the amount (unit price × quantity; 0 when the
// caller of Void knows only the reservation).
type Authorization struct {
	Activity      string
	User          string
	ReservationID string
	Amount        order.Cents
}

func key(op, reservationID string) string { return op + ":" + reservationID }

// Flow calls the shop's [Provider] at the transitions of an order:
// [Flow.Authorize] at reservation, [Flow.Capture] when the order stands,
// and a void after every release of a reservation that was not paid
// ([Flow.Releaser]: the consumer's release of a failed order, the
// cancellation of an unpaid one, an expiry, the reconciler's repairs). It
// is safe for concurrent use.
type Flow struct {
	name   string
	p      Provider
	c      *status.Canceller
	orders *status.Orders
}

// NewFlow returns a flow for the provider p named name ([order.ValidID]:
// the Provider of the payments it records, see [Flow.Capture]), paying
// through c and reading orders through orders. Every argument is
// required; a missing one fails with order.ErrInvalidConfig.
func NewFlow(name string, p Provider, c *status.Canceller, orders *status.Orders) (*Flow, error) {
	if !order.ValidID(name) || p == nil || c == nil || orders == nil {
		return nil, fmt.Errorf("%w: NewFlow needs a provider name, a provider, a canceller and an order reader", order.ErrInvalidConfig)
	}
	return &Flow{name: name, p: p, c: c, orders: orders}, nil
}

// Authorize authorizes a's amount at reservation, with the key
// "authorize:<reservation ID>". An error means no authorization stands:
// the caller releases the reservation (whose void, through
// [Flow.Releaser], cancels an authorization whose answer was lost).
func (f *Flow) Authorize(ctx context.Context, a Authorization) error {
	if !order.ValidReservationID(a.ReservationID) {
		return fmt.Errorf("%w: reservation ID", order.ErrInvalidArgument)
	}
	if err := f.p.Authorize(ctx, key("authorize", a.ReservationID), a); err != nil {
		return fmt.Errorf("payment: authorize %s: %w", a.ReservationID, err)
	}
	return nil
}

// Capture captures the authorization of order orderNo once the order
// stands. The order is paid first, in the database — status.Canceller.PayRef
// with the payment (the flow's name, "capture:<reservation ID>") — and the
// provider's Capture is called only when that answered paid: a capture
// never races a void (a cancellation wins the order's CAS or loses it).
// It returns nil when the order is paid and captured; PayRef's refusals
// (status.ErrOrderCancelled when the cancellation won — nothing captured,
// the cancellation voids — status.ErrOrderNotFound, …); or the provider's
// error, the order then PAID and not yet captured: call Capture again
// until it returns nil (it is idempotent, the provider's key too).
//
// A shop that pays only through a Flow needs no late-payment hook: the
// rare capture whose order was cancelled between the order's read and
// PayRef calls it (status.WithOnPayCancelled) although nothing was
// captured.
func (f *Flow) Capture(ctx context.Context, orderNo string) error {
	o, err := f.orders.Get(ctx, orderNo)
	if err != nil {
		return err
	}
	if o.Status == order.OrderCancelled {
		return status.ErrOrderCancelled
	}
	k := key("capture", o.ReservationID)
	if err := f.c.PayRef(ctx, orderNo, status.Payment{Provider: f.name, Reference: k}); err != nil {
		return err
	}
	if err := f.p.Capture(ctx, k, authOf(o)); err != nil {
		return fmt.Errorf("payment: capture %s (paid, not captured: call Capture again): %w", orderNo, err)
	}
	return nil
}

// authOf is the authorization o's capture takes: its units at its unit
// price, or for an order with lines (Qty 0) the lines that follow it
// (not cancelled) at theirs.
func authOf(o order.Order) Authorization {
	amount := o.Price * order.Cents(o.Qty)
	for _, l := range o.Lines {
		if l.Status == "" {
			amount += l.Price * order.Cents(l.Qty)
		}
	}
	return Authorization{Activity: o.ActivityID, User: o.UserID, ReservationID: o.ReservationID, Amount: amount}
}

// Releaser wraps rel so that every release of a reservation voids its
// authorization after the release succeeded, with the key
// "void:<reservation ID>" — except the release of a refunded order's
// restock (status.Canceller.Refund with status.RestockSale): that
// authorization was captured. The wrapper implements
// status.OrderReleaser, calling rel's ReleaseOrder when rel has it. A
// failed void is returned like a failed release, so the canceller retries
// both (each idempotent). Give the wrapper, not rel, to the consumer, the
// canceller and the reconciler.
func (f *Flow) Releaser(rel order.Releaser) order.Releaser {
	return &voidingReleaser{rel: rel, f: f}
}

type voidingReleaser struct {
	rel order.Releaser
	f   *Flow
}

var _ status.OrderReleaser = (*voidingReleaser)(nil)

func (v *voidingReleaser) Release(ctx context.Context, activity, reservationID string) error {
	if err := v.rel.Release(ctx, activity, reservationID); err != nil {
		return err
	}
	return v.void(ctx, Authorization{Activity: activity, ReservationID: reservationID})
}

func (v *voidingReleaser) ReleaseOrder(ctx context.Context, o order.Order) error {
	var err error
	if or, ok := v.rel.(status.OrderReleaser); ok {
		err = or.ReleaseOrder(ctx, o)
	} else {
		err = v.rel.Release(ctx, o.ActivityID, o.ReservationID)
	}
	if err != nil || o.Status == order.OrderRefunded {
		return err
	}
	return v.void(ctx, authOf(o))
}

func (v *voidingReleaser) void(ctx context.Context, a Authorization) error {
	if err := v.f.p.Void(ctx, key("void", a.ReservationID), a); err != nil {
		return fmt.Errorf("payment: void %s: %w", a.ReservationID, err)
	}
	return nil
}
