package status

import (
	"context"
	"fmt"

	"github.com/seckillkit/seckill/order"
	"gorm.io/gorm"
)

// Orders reads orders, so that no caller reads the tables itself:
// [Orders.Get] by order number, [Orders.ByReservation], [Orders.ByUser].
// The [order.Order] returned is the row as committed (Headers nil), with
// its Lines when it is an order with lines. To pay
// or cancel an order, see [Canceller.Pay] and [Canceller.Cancel]. Safe for
// concurrent use.
type Orders struct {
	db *gorm.DB
	o  options
}

// NewOrders returns an order reader over db. Option: [WithTables].
func NewOrders(db *gorm.DB, opts ...TableOption) (*Orders, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: NewOrders needs a db", order.ErrInvalidConfig)
	}
	o, err := buildOptions(opts, TableOption.applyOrders)
	if err != nil {
		return nil, err
	}
	return &Orders{db: db, o: o}, nil
}

// Get returns the order orderNo, or [ErrOrderNotFound].
func (s *Orders) Get(ctx context.Context, orderNo string) (order.Order, error) {
	return s.one(ctx, "order_no", orderNo)
}

// ByReservation returns the order of a reservation (at most one exists),
// or [ErrOrderNotFound].
func (s *Orders) ByReservation(ctx context.Context, reservationID string) (order.Order, error) {
	return s.one(ctx, "reservation_id", reservationID)
}

func (s *Orders) one(ctx context.Context, column, value string) (order.Order, error) {
	if value == "" || len(value) > order.MaxReservationIDLen {
		return order.Order{}, fmt.Errorf("%w: %s must be 1..%d bytes", ErrOrderNotFound, column, order.MaxReservationIDLen)
	}
	var rows []order.Order
	if err := s.db.WithContext(ctx).Table(s.o.tables.Order).Where(column+" = ?", value).Limit(1).Find(&rows).Error; err != nil {
		return order.Order{}, fmt.Errorf("order: get by %s: %w", column, err)
	}
	if len(rows) == 0 {
		return order.Order{}, fmt.Errorf("%w: %s %s", ErrOrderNotFound, column, value)
	}
	return rows[0], s.lines(ctx, rows[:1])
}

// lines reads the lines of the orders with lines among os into their Lines.
func (s *Orders) lines(ctx context.Context, os []order.Order) error {
	for i := range os {
		if hasLines(os[i]) {
			ls, err := readLines(s.db.WithContext(ctx), s.o.tables.Line, os[i].OrderNo)
			if err != nil {
				return err
			}
			os[i].Lines = ls
		}
	}
	return nil
}

// ByUser returns every order (live and cancelled) of user in activity,
// oldest first; none is an empty slice, not an error. IDs that are not
// [order.ValidID] fail with [order.ErrInvalidID].
func (s *Orders) ByUser(ctx context.Context, activity, user string) ([]order.Order, error) {
	if err := checkID("activity", activity); err != nil {
		return nil, err
	}
	if err := checkID("user", user); err != nil {
		return nil, err
	}
	rows := []order.Order{}
	if err := s.db.WithContext(ctx).Table(s.o.tables.Order).Where("user_id = ? AND activity_id = ?", user, activity).
		Order("created_at").Order("id").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("order: orders of %s in %s: %w", user, activity, err)
	}
	return rows, s.lines(ctx, rows)
}
