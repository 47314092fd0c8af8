package status

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/seckillkit/seckill/internal/observe"
	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/order/internal/dbx"
	"gorm.io/gorm"
)

// The outcomes of a payment row (seckill_payment.outcome).
const (
	outcomePaid     = "PAID"
	outcomeConflict = "CONFLICT"
	outcomeLate     = "LATE"
)

// paymentRow is a row of the payment table.
type paymentRow struct {
	Provider  string
	Reference string
	OrderNo   string
	Outcome   string
	CreatedAt time.Time
}

var errPaymentRace = errors.New("order: payment recorded concurrently")

// PayRef pays orderNo with p, in one transaction with the order's state:
// the payment is recorded by (provider, reference) — the same payment
// reported again (a provider's retry, a callback out of order) finds its
// row and answers as the first time, changing nothing.
//
// It returns nil when p paid the order (now or before); [ErrPaymentConflict]
// when another payment had paid it (p is recorded and the conflict hook
// [WithOnPayConflict] called: refund p); [ErrOrderCancelled] when the order
// was cancelled, or its payment window had passed (PayRef cancels it then,
// in the same transaction, and releases its reservation after the commit):
// the late-payment hook ([WithOnPayCancelled]) was called, refund p;
// [ErrOrderNotFound]; an error wrapping [order.ErrInvalidID] or
// [order.ErrInvalidArgument] for a bad p; or an infrastructure error
// (nothing changed). The hooks are called after the commit, outside any
// transaction, on every answer that names them — a repeat too — so they
// are at least once: refund by (provider, reference), idempotently.
//
// Do not mix [Canceller.Pay] and PayRef for one order: Pay records no
// payment, so a PayRef after it is a conflict.
func (c *Canceller) PayRef(ctx context.Context, orderNo string, p Payment) error {
	if err := checkID("provider", p.Provider); err != nil {
		return err
	}
	if !order.ValidReservationID(p.Reference) {
		return fmt.Errorf("%w: payment reference %s (1..%d printable ASCII bytes)", order.ErrInvalidArgument,
			dbx.DescribeID(p.Reference, order.MaxReservationIDLen), order.MaxReservationIDLen)
	}
	var err error
	for attempt := range txAttempts { // a concurrent report of the same payment: read its row
		if attempt > 0 && dbx.IsRetryable(err) {
			if serr := dbx.SleepBackoff(ctx, time.Millisecond, 100*time.Millisecond, attempt); serr != nil {
				return fmt.Errorf("order: pay %s: %w", orderNo, errors.Join(err, serr))
			}
		}
		var out string
		var o order.Order
		var cancelled bool
		now := c.o.clock.Now()
		err = c.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
			var e error
			out, o, cancelled, e = c.payTx(tx, orderNo, p, now)
			return e
		})
		if errors.Is(err, errPaymentRace) || dbx.IsRetryable(err) {
			continue // the database rolled it back: run it again
		}
		if err != nil {
			if errors.Is(err, ErrOrderNotFound) || errors.Is(err, ErrPaymentConflict) {
				return err
			}
			return fmt.Errorf("order: pay %s: %w", orderNo, err)
		}
		var pending error
		if cancelled {
			var start time.Time
			if c.o.observer != nil {
				start = time.Now()
			}
			if rerr := c.release(context.WithoutCancel(ctx), o); rerr != nil {
				pending = errors.Join(fmt.Errorf("%w: order %s, reservation %s: %w", ErrReleasePending, orderNo, o.ReservationID, rerr),
					c.requeue(ctx, orderNo, now))
			}
			if c.o.observer != nil {
				c.observeCancel(ctx, start, o.ActivityID, pending)
			}
		}
		switch out {
		case outcomePaid:
			return nil
		case outcomeConflict:
			if c.o.onPayConflict != nil {
				c.o.onPayConflict(ctx, o, p)
			}
			return ErrPaymentConflict
		default: // outcomeLate
			if c.o.onPayCancel != nil {
				c.o.onPayCancel(ctx, o)
			}
			if pending != nil {
				return errors.Join(ErrOrderCancelled, pending)
			}
			return ErrOrderCancelled
		}
	}
	return fmt.Errorf("order: pay %s: %w", orderNo, err)
}

// payTx is PayRef's transaction: the payment's row answers a repeat;
// otherwise the CAS CREATED → PAID, else the cancellation of an expired
// order, else the order's state says conflict or late, and the payment is
// recorded with that outcome. A concurrent insert of the same payment
// rolls back with errPaymentRace.
func (c *Canceller) payTx(tx *gorm.DB, orderNo string, p Payment, now time.Time) (out string, o order.Order, cancelled bool, err error) {
	var rows []paymentRow
	if err := tx.Table(c.o.tables.Payment).Where("provider = ? AND reference = ?", p.Provider, p.Reference).
		Limit(1).Find(&rows).Error; err != nil {
		return "", o, false, err
	}
	if len(rows) == 1 {
		if rows[0].OrderNo != orderNo {
			return "", o, false, fmt.Errorf("%w: %s %s was recorded for order %s", ErrPaymentConflict, p.Provider, p.Reference, rows[0].OrderNo)
		}
		o, err = c.find(tx, orderNo)
		return rows[0].Outcome, o, false, err
	}
	res := tx.Table(c.o.tables.Order).Where("order_no = ? AND status = ? AND expire_time > ?", orderNo, order.OrderCreated, now).
		Updates(map[string]any{"status": order.OrderPaid, "pay_time": now, "updated_at": now})
	if res.Error != nil {
		return "", o, false, res.Error
	}
	switch {
	case res.RowsAffected == 1:
		out = outcomePaid
	default:
		o, err = c.cancelTx(tx, orderNo, now, true)
		switch {
		case err == nil:
			out, cancelled = outcomeLate, true
		case !errors.Is(err, errCASLost):
			return "", o, false, err
		default:
			if o, err = c.find(tx, orderNo); err != nil {
				return "", o, false, err
			}
			switch o.Status {
			case order.OrderPaid, order.OrderRefunded:
				out = outcomeConflict
			case order.OrderCancelled:
				out = outcomeLate
			default: // CREATED, not expired, yet the CAS lost: changed under us
				return "", o, false, errPaymentRace
			}
		}
	}
	if err := tx.Table(c.o.tables.Payment).Create(&paymentRow{Provider: p.Provider, Reference: p.Reference, OrderNo: orderNo,
		Outcome: out, CreatedAt: now}).Error; err != nil {
		if dbx.IsDuplicate(err) {
			return "", o, false, errPaymentRace
		}
		return "", o, false, err
	}
	if out == outcomePaid {
		o, err = c.find(tx, orderNo)
	}
	return out, o, cancelled, err
}

// Refund moves a PAID order to REFUNDED (CAS: UPDATE … WHERE status =
// 'PAID'), the whole order, and puts its units where restock says, in the
// same transaction: [RestockSale] restores the DB stock and frees the
// buyer's slot, then — after the commit — releases the Redis reservation
// through the releaser, as a cancellation does; [RestockShop] runs the
// refund hook ([WithRefundHook]) in the transaction; [RestockNone] moves
// nothing. Only the call whose CAS made the transition restocks, so a
// refund retried, or racing a cancellation, an expiry or another refund,
// restocks exactly once.
//
// It returns nil when this call refunded the order; [ErrAlreadyRefunded]
// when it was refunded before (the first restock choice stands; with
// RestockSale the release is re-issued, idempotently); [ErrNotPaid] for a
// CREATED order; [ErrAlreadyCancelled]; [ErrOrderNotFound]; an error
// wrapping [order.ErrInvalidArgument] for an unknown restock, or
// RestockShop without a refund hook; or an infrastructure error (nothing
// changed — or, with [ErrReleasePending], refunded but not yet released in
// Redis: call Refund again; the reconcile.Reconciler releases it too).
func (c *Canceller) Refund(ctx context.Context, orderNo string, restock Restock) error {
	switch restock {
	case RestockNone, RestockSale:
	case RestockShop:
		if c.o.refundHook == nil {
			return fmt.Errorf("%w: restock to the shop needs a refund hook (WithRefundHook)", order.ErrInvalidArgument)
		}
	default:
		return fmt.Errorf("%w: restock %q", order.ErrInvalidArgument, restock)
	}
	var o order.Order
	var err error
	for attempt := range txAttempts { // a CAS lost to the payment it was waiting for, or a deadlock rolled back: try again
		if attempt > 0 && dbx.IsRetryable(err) {
			if serr := dbx.SleepBackoff(ctx, time.Millisecond, 100*time.Millisecond, attempt); serr != nil {
				break
			}
		}
		if o, err = c.refundOnce(ctx, orderNo, restock); !errors.Is(err, errCASLost) && !dbx.IsRetryable(err) {
			break
		}
	}
	if errors.Is(err, errCASLost) {
		err = fmt.Errorf("order: refund %s: the order keeps changing", orderNo)
	}
	if c.o.observer != nil {
		c.o.observer.Observe(ctx, observe.Event{Stage: StageRefund, Outcome: refundOutcome(err), Activity: o.ActivityID, Err: errIf(err)})
	}
	switch {
	case err == nil, errors.Is(err, ErrAlreadyRefunded):
		if o.Restock != string(RestockSale) {
			return err
		}
		if rerr := c.release(context.WithoutCancel(ctx), o); rerr != nil {
			return errors.Join(err, fmt.Errorf("%w: refunded order %s, reservation %s: %w", ErrReleasePending, orderNo, o.ReservationID, rerr))
		}
		return err
	case errors.Is(err, ErrNotPaid), errors.Is(err, ErrAlreadyCancelled), errors.Is(err, ErrOrderNotFound):
		return err
	default:
		return fmt.Errorf("order: refund %s: %w", orderNo, err)
	}
}

// refundOnce is one attempt of Refund: the CAS and its restock in one
// transaction, or, when the CAS changed nothing, the order's state as an
// error — errCASLost when it is PAID (paid since the CAS looked).
func (c *Canceller) refundOnce(ctx context.Context, orderNo string, restock Restock) (order.Order, error) {
	now := c.o.clock.Now()
	var o order.Order
	err := c.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		set := map[string]any{"status": order.OrderRefunded, "refund_time": now, "restock": string(restock), "updated_at": now}
		if restock == RestockSale {
			set["live_slot"] = nil
		}
		res := tx.Table(c.o.tables.Order).Where("order_no = ? AND status = ?", orderNo, order.OrderPaid).Updates(set)
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			return errCASLost
		}
		var err error
		if o, err = c.find(tx, orderNo); err != nil {
			return err
		}
		if hasLines(o) {
			// Every line still following the order is refunded with it.
			if o.Lines, err = liveLines(tx, c.o.tables.Line, orderNo); err != nil {
				return err
			}
			if err := settleLines(tx, c.o.tables.Line, o.Lines, order.OrderRefunded, string(restock), now); err != nil {
				return err
			}
			switch restock {
			case RestockSale:
				return restoreLines(tx, c.restoreStock, o.Lines)
			case RestockShop:
				return c.o.refundHook(ctx, tx, []order.Order{o})
			}
			return nil
		}
		switch restock {
		case RestockSale:
			return tx.Exec(c.restoreStock, o.Qty, o.ActivityID).Error
		case RestockShop:
			return c.o.refundHook(ctx, tx, []order.Order{o})
		}
		return nil
	})
	if errors.Is(err, errCASLost) {
		if o, err = c.find(c.db.WithContext(ctx), orderNo); err == nil {
			switch o.Status {
			case order.OrderPaid:
				err = errCASLost
			case order.OrderRefunded:
				err = ErrAlreadyRefunded
			case order.OrderCreated:
				err = ErrNotPaid
			default:
				err = statusErr(o.Status)
			}
		}
	}
	return o, err
}

func refundOutcome(err error) string {
	switch {
	case err == nil:
		return observe.OK
	case errors.Is(err, ErrAlreadyRefunded):
		return "already_refunded"
	case errors.Is(err, ErrNotPaid):
		return "not_paid"
	case errors.Is(err, ErrAlreadyCancelled):
		return "already_cancelled"
	case errors.Is(err, ErrOrderNotFound):
		return "not_found"
	}
	return observe.Error
}

func errIf(err error) error {
	if refundOutcome(err) == observe.Error {
		return err
	}
	return nil
}
