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

// CancelLine cancels line lineNo of a CREATED order with lines (a cart:
// order.Message.Lines): in one transaction, under the order's row lock, the
// line's CAS ” → CANCELLED and its units back to its activity's DB stock;
// then the line's Redis reservation ("<id>#<lineNo>") is released through
// the releaser, as [Canceller.Cancel] releases an order's. The order stays
// CREATED, payable for its other lines (with none left, its expiry cancels
// it, restocking nothing more). Only the call whose CAS moved the line
// restocks, so retries and racing callers restock it exactly once.
//
// It returns nil when this call cancelled the line; [ErrAlreadyCancelled]
// when the line was cancelled before, alone or with its order (the release
// is re-issued, idempotently); [ErrAlreadyRefunded] for a refunded line;
// [ErrAlreadyPaid] when the order is paid (refund the line instead:
// [Canceller.RefundLine]); [ErrOrderNotFound] for an unknown order, an
// order without lines or a line it does not have; or an infrastructure error
// (nothing changed — or, with [ErrReleasePending], cancelled but not yet
// released: call CancelLine again; the reconcile.Reconciler releases it
// too).
func (c *Canceller) CancelLine(ctx context.Context, orderNo string, lineNo int) error {
	o, l, err := c.lineOnce(ctx, orderNo, lineNo, func(tx *gorm.DB, o order.Order, now time.Time) (order.Line, error) {
		if o.Status != order.OrderCreated {
			return order.Line{}, statusErr(o.Status)
		}
		return c.moveLine(tx, o, lineNo, order.OrderCancelled, "", now)
	})
	if c.o.observer != nil {
		c.o.observer.Observe(ctx, observe.Event{Stage: StageCancel, Outcome: cancelOutcome(err), Activity: l.ActivityID, Err: errIfCancel(err)})
	}
	switch {
	case err == nil, errors.Is(err, ErrAlreadyCancelled) && l.Status == order.OrderCancelled:
		if rerr := c.releaseOne(context.WithoutCancel(ctx), lineOrder(o, l)); rerr != nil {
			return errors.Join(err, fmt.Errorf("%w: order %s, line %d, reservation %s: %w", ErrReleasePending, orderNo, lineNo, l.ReservationID, rerr))
		}
		return err
	case errors.Is(err, ErrAlreadyCancelled), errors.Is(err, ErrAlreadyPaid), errors.Is(err, ErrAlreadyRefunded),
		errors.Is(err, ErrOrderNotFound):
		return err
	default:
		return fmt.Errorf("order: cancel %s line %d: %w", orderNo, lineNo, err)
	}
}

// RefundLine refunds line lineNo of a PAID order with lines, putting its
// units where restock says, with the choices of [Canceller.Refund]: in one
// transaction, under the order's row lock, the line's CAS ” → REFUNDED
// (its Restock column set) and [RestockSale]: its units back to its
// activity's DB stock, then — after the commit — its Redis reservation
// released through the releaser; [RestockShop]: the refund hook
// ([WithRefundHook]) run with the order, its Lines holding this line
// alone; [RestockNone]: nothing moves. The order stays PAID. Only the call
// whose CAS moved the line restocks: exactly once under retries and races.
//
// It returns nil when this call refunded the line; [ErrAlreadyRefunded]
// when it was refunded before (the first restock choice stands; with
// RestockSale the release is re-issued); [ErrNotPaid] for a CREATED order
// (cancel the line: [Canceller.CancelLine]); [ErrAlreadyCancelled] for a
// cancelled order or line; [ErrOrderNotFound] for an unknown order, an
// order without lines or a line it does not have; an error wrapping
// [order.ErrInvalidArgument] for a bad restock (as Refund); or an
// infrastructure error (nothing changed, or with [ErrReleasePending]:
// refunded, the release to Redis still to do: call RefundLine again).
func (c *Canceller) RefundLine(ctx context.Context, orderNo string, lineNo int, restock Restock) error {
	switch restock {
	case RestockNone, RestockSale:
	case RestockShop:
		if c.o.refundHook == nil {
			return fmt.Errorf("%w: restock to the shop needs a refund hook (WithRefundHook)", order.ErrInvalidArgument)
		}
	default:
		return fmt.Errorf("%w: restock %q", order.ErrInvalidArgument, restock)
	}
	o, l, err := c.lineOnce(ctx, orderNo, lineNo, func(tx *gorm.DB, o order.Order, now time.Time) (order.Line, error) {
		switch o.Status {
		case order.OrderPaid:
		case order.OrderCreated:
			return order.Line{}, ErrNotPaid
		default: // its lines left with it
			return order.Line{}, statusErr(o.Status)
		}
		l, err := c.moveLine(tx, o, lineNo, order.OrderRefunded, string(restock), now)
		if err != nil || restock != RestockShop {
			return l, err
		}
		o.Lines = []order.Line{l}
		return l, c.o.refundHook(ctx, tx, []order.Order{o})
	})
	if c.o.observer != nil {
		c.o.observer.Observe(ctx, observe.Event{Stage: StageRefund, Outcome: refundOutcome(err), Activity: l.ActivityID, Err: errIf(err)})
	}
	switch {
	case err == nil, errors.Is(err, ErrAlreadyRefunded):
		if l.Restock != string(RestockSale) || l.Status != order.OrderRefunded {
			return err
		}
		if rerr := c.releaseOne(context.WithoutCancel(ctx), lineOrder(o, l)); rerr != nil {
			return errors.Join(err, fmt.Errorf("%w: refunded order %s, line %d, reservation %s: %w", ErrReleasePending, orderNo, lineNo, l.ReservationID, rerr))
		}
		return err
	case errors.Is(err, ErrNotPaid), errors.Is(err, ErrAlreadyCancelled), errors.Is(err, ErrOrderNotFound):
		return err
	default:
		return fmt.Errorf("order: refund %s line %d: %w", orderNo, lineNo, err)
	}
}

// lineOnce runs move in a transaction with orderNo's row locked (a deadlock
// the database broke by rolling it back is run again, as [Canceller.Cancel]
// does) and returns the order and the line as they are after it: on
// success the line move changed, on a refusal the line as committed (an
// unknown line is [ErrOrderNotFound]).
func (c *Canceller) lineOnce(ctx context.Context, orderNo string, lineNo int,
	move func(tx *gorm.DB, o order.Order, now time.Time) (order.Line, error)) (order.Order, order.Line, error) {
	var (
		o   order.Order
		l   order.Line
		err error
	)
	for attempt := range txAttempts {
		if attempt > 0 {
			if serr := dbx.SleepBackoff(ctx, time.Millisecond, 100*time.Millisecond, attempt); serr != nil {
				break
			}
		}
		now := c.o.clock.Now()
		err = c.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
			var rows []order.Order
			q := "SELECT * FROM " + dbx.QuoteIdent(tx, c.o.tables.Order) + " WHERE order_no = ?" + forUpdate(tx)
			if err := tx.Raw(q, orderNo).Scan(&rows).Error; err != nil {
				return fmt.Errorf("order: find %s: %w", orderNo, err)
			}
			if len(rows) == 0 {
				return ErrOrderNotFound
			}
			if o = rows[0]; !hasLines(o) {
				return fmt.Errorf("%w: order %s has no lines", ErrOrderNotFound, orderNo)
			}
			var err error
			l, err = move(tx, o, now)
			return err
		})
		if !dbx.IsRetryable(err) {
			break
		}
	}
	if err != nil && !errors.Is(err, ErrOrderNotFound) && l.OrderNo == "" {
		// A refusal: read the line as committed (for its reservation).
		if ls, rerr := readLines(c.db.WithContext(ctx), c.o.tables.Line, orderNo); rerr == nil {
			for _, x := range ls {
				if x.LineNo == lineNo {
					l = x
				}
			}
		}
	}
	return o, l, err
}

// moveLine is the line's CAS ” → status (with restock) and, for a
// cancellation or a refund to the sale, its units back to the DB stock.
// A line that is not live is the error of its state.
func (c *Canceller) moveLine(tx *gorm.DB, o order.Order, lineNo int, status, restock string, now time.Time) (order.Line, error) {
	res := tx.Table(c.o.tables.Line).Where("order_no = ? AND line_no = ? AND status = ''", o.OrderNo, lineNo).
		Updates(map[string]any{"status": status, "restock": restock, "updated_at": now})
	if res.Error != nil {
		return order.Line{}, res.Error
	}
	var ls []order.Line
	if err := tx.Table(c.o.tables.Line).Where("order_no = ? AND line_no = ?", o.OrderNo, lineNo).Limit(1).Find(&ls).Error; err != nil {
		return order.Line{}, err
	}
	if len(ls) == 0 {
		return order.Line{}, fmt.Errorf("%w: order %s has no line %d", ErrOrderNotFound, o.OrderNo, lineNo)
	}
	l := ls[0]
	if res.RowsAffected == 0 {
		return l, statusErr(l.Status)
	}
	if status == order.OrderCancelled || restock == string(RestockSale) {
		return l, tx.Exec(c.restoreStock, l.Qty, l.ActivityID).Error
	}
	return l, nil
}

// errIfCancel is err when it is a failure (not a refusal of CancelLine).
func errIfCancel(err error) error {
	if cancelOutcome(err) == observe.Error {
		return err
	}
	return nil
}
