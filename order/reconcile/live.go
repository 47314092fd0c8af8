package reconcile

import (
	"context"
	"fmt"

	"github.com/seckillkit/seckill/order"
	"gorm.io/gorm"
)

// LiveReservations returns the reservations of an activity's live (CREATED
// or PAID, or REFUNDED without a restock to the sale: those units stay
// sold) orders: what the Redis ledger must hold for them. A Redis
// rebuild after data loss (stock.Deductor.Rebuild) loads exactly these,
// once nothing is in flight any more. The only option is order.WithTables. An
// activity that is not [order.ValidID] fails with [order.ErrInvalidID].
func LiveReservations(ctx context.Context, db *gorm.DB, activity string, opts ...order.TableOption) ([]Reservation, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: LiveReservations needs a db", order.ErrInvalidConfig)
	}
	t, err := order.TablesOf(opts...)
	if err != nil {
		return nil, err
	}
	if err := checkID("activity", activity); err != nil {
		return nil, err
	}
	var rows []order.Order
	if err := db.WithContext(ctx).Table(t.Order).Select("reservation_id", "user_id", "qty", "created_at").
		Where("activity_id = ? AND (status IN ? OR status = ? AND restock <> ?)", activity, []string{order.OrderCreated, order.OrderPaid},
			order.OrderRefunded, "sale").
		Order("id").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("order: live reservations of %s: %w", activity, err)
	}
	out := make([]Reservation, len(rows))
	for i, o := range rows {
		out[i] = Reservation{ID: o.ReservationID, User: o.UserID, Qty: o.Qty, At: o.CreatedAt}
	}
	return out, nil
}
