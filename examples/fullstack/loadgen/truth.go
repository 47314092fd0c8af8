package main

import (
	"context"
	"fmt"
	"strings"

	"gorm.io/gorm"

	"github.com/seckillkit/seckill/examples/fullstack/history"
	"github.com/seckillkit/seckill/order"
)

// newTruth is truthOf (a test plants a lie in it).
var newTruth = truthOf

// truthOf reads the stores' facts about an activity's reservations
// straight from the service's database (load.Config.Truth): each order's
// user, number and status, and each FAILED outcome (message_dedup), in
// one transaction.
func truthOf(db *gorm.DB) func(ctx context.Context, activity string) (history.Truth, error) {
	return func(ctx context.Context, activity string) (history.Truth, error) {
		truth := history.Truth{}
		err := db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
			var orders []order.Order
			// A sale with variants files each order under its variant's
			// activity "<activity>/<variant>".
			if err := tx.Where("activity_id = ? OR activity_id LIKE ?", activity, activity+"/%").Find(&orders).Error; err != nil {
				return fmt.Errorf("orders: %w", err)
			}
			for _, o := range orders {
				if f, dup := truth[o.ReservationID]; dup {
					return fmt.Errorf("reservation %s has two orders: %s and %s", o.ReservationID, f.OrderNo, o.OrderNo)
				}
				truth[o.ReservationID] = history.Fact{User: o.UserID, OrderNo: o.OrderNo, Status: strings.ToLower(o.Status)}
			}
			var dedup []order.Dedup
			if err := tx.Where("activity_id = ? OR activity_id LIKE ?", activity, activity+"/%").Find(&dedup).Error; err != nil {
				return fmt.Errorf("message_dedup: %w", err)
			}
			for _, d := range dedup {
				if d.Outcome == string(order.StatusFailed) {
					f := truth[d.ReservationID]
					f.Failed = true
					truth[d.ReservationID] = f
				}
			}
			return nil
		})
		return truth, err
	}
}
