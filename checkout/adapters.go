package checkout

import (
	"context"

	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/order/reconcile"
	"github.com/seckillkit/seckill/stock"
)

// Releaser is s's Release as the order package's releaser, for the fence,
// the consumer, the canceller and the reconciler (order imports no stock).
func Releaser(s Stock) order.ReleaserFunc {
	return func(ctx context.Context, activity, reservationID string) error {
		_, err := s.Release(ctx, activity, reservationID)
		return err
	}
}

// Ledger is d's ledger of held reservations as the order reconciler reads
// it: released entries and tombstones left out.
func Ledger(d *stock.Deductor) reconcile.Ledger {
	return func(ctx context.Context, activity string, cursor uint64, count int64) ([]reconcile.Reservation, uint64, error) {
		page, next, err := d.Reservations(ctx, activity, cursor, count)
		if err != nil {
			return nil, 0, err
		}
		out := make([]reconcile.Reservation, 0, len(page))
		for _, r := range page {
			if r.State == stock.Held {
				out = append(out, reconcile.Reservation{ID: r.ID, User: r.User, Qty: r.Qty, At: r.ReservedAt})
			}
		}
		return out, next, nil
	}
}
