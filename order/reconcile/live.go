package reconcile

import (
	"context"
	"fmt"
	"time"

	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/order/internal/dbx"
	"gorm.io/gorm"
)

// LiveReservations returns the reservations of an activity's live (CREATED
// or PAID, or REFUNDED without a restock to the sale: those units stay
// sold) orders: what the Redis ledger must hold for them. A Redis
// rebuild after data loss (stock.Deductor.Rebuild) loads exactly these,
// once nothing is in flight any more. The live lines of the orders with
// lines in the activity (a variant's "a/v" too) are among them, each under
// its reservation "<id>#<i>", at its order's time. The only option is order.WithTables. An
// activity that is not [order.ValidID] fails with [order.ErrInvalidID].
func LiveReservations(ctx context.Context, db *gorm.DB, activity string, opts ...order.TableOption) ([]Reservation, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: LiveReservations needs a db", order.ErrInvalidConfig)
	}
	t, err := order.TablesOf(opts...)
	if err != nil {
		return nil, err
	}
	if err := checkActivity(activity); err != nil {
		return nil, err
	}
	var rows []order.Order
	if err := db.WithContext(ctx).Table(t.Order).Select("reservation_id", "user_id", "qty", "created_at").
		Where("activity_id = ? AND qty > 0 AND (status IN ? OR status = ? AND restock <> ?)", activity, []string{order.OrderCreated, order.OrderPaid},
			order.OrderRefunded, "sale").
		Order("id").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("order: live reservations of %s: %w", activity, err)
	}
	out := make([]Reservation, 0, len(rows))
	for _, o := range rows {
		out = append(out, Reservation{ID: o.ReservationID, User: o.UserID, Qty: o.Qty, At: o.CreatedAt})
	}
	// The live lines of the orders with lines, at their order's time.
	var lines []struct {
		ReservationID string
		UserID        string
		Qty           int64
		CreatedAt     time.Time
	}
	l, o := dbx.QuoteIdent(db, t.Line), dbx.QuoteIdent(db, t.Order)
	if err := db.WithContext(ctx).Raw("SELECT l.reservation_id, l.user_id, l.qty, o.created_at FROM "+l+" l JOIN "+o+
		" o ON o.order_no = l.order_no WHERE l.activity_id = ? AND (l.status = '' OR l.status = ? AND l.restock <> ?) ORDER BY o.id, l.line_no",
		activity, order.OrderRefunded, "sale").Scan(&lines).Error; err != nil {
		return nil, fmt.Errorf("order: live line reservations of %s: %w", activity, err)
	}
	for _, x := range lines {
		out = append(out, Reservation{ID: x.ReservationID, User: x.UserID, Qty: x.Qty, At: x.CreatedAt})
	}
	return out, nil
}
