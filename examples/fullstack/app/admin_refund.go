package app

import (
	"context"
	"errors"
	"fmt"

	"github.com/seckillkit/seckill/admin"
	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/order/status"
)

// Refund is the admin API's refund (POST …/orders/{order}/refund,
// seckillctl refund): through the fake provider and its signed callback,
// as every refund of this deployment (App.Refund, fakepay.go). The order
// is read before and after for the audit row.
func (b *adminBackend) Refund(ctx context.Context, p admin.RefundParams) (admin.OrderChange, error) {
	var ch admin.OrderChange
	before, err := b.order(ctx, p.Activity, p.OrderNo)
	if err != nil {
		return ch, err
	}
	ch.Before = before
	switch err := b.a.Refund(ctx, p.OrderNo, status.Restock(p.Restock)); {
	case err == nil:
	case errors.Is(err, status.ErrAlreadyRefunded), errors.Is(err, status.ErrNotPaid), errors.Is(err, status.ErrAlreadyCancelled):
		return ch, fmt.Errorf("%w: %w", admin.ErrConflict, err)
	case errors.Is(err, status.ErrOrderNotFound):
		return ch, fmt.Errorf("%w: %w", admin.ErrNotFound, err)
	case errors.Is(err, order.ErrInvalidArgument):
		return ch, fmt.Errorf("%w: %w", admin.ErrInvalidArgument, err)
	default:
		return ch, err
	}
	ch.After, err = b.order(ctx, p.Activity, p.OrderNo)
	return ch, err
}

// order reads one order of the activity for the admin API.
func (b *adminBackend) order(ctx context.Context, activity, orderNo string) (admin.Order, error) {
	o, err := b.orders.Get(ctx, orderNo)
	switch {
	case errors.Is(err, status.ErrOrderNotFound) || (err == nil && o.ActivityID != activity):
		return admin.Order{}, fmt.Errorf("%w: order %s of activity %s", admin.ErrNotFound, orderNo, activity)
	case err != nil:
		return admin.Order{}, err
	}
	return admin.Order{OrderNo: o.OrderNo, User: o.UserID, Qty: o.Qty, Status: o.Status, Restock: o.Restock, CreatedAt: o.CreatedAt}, nil
}
