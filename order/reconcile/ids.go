package reconcile

import (
	"fmt"
	"strings"

	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/order/internal/dbx"
)

// checkID returns nil for a valid ID ([order.ValidID]), else an error
// wrapping [order.ErrInvalidID] that never echoes an over-long ID.
func checkID(what, id string) error {
	if order.ValidID(id) {
		return nil
	}
	return fmt.Errorf("%w: %s %s", order.ErrInvalidID, what, dbx.DescribeID(id, order.MaxIDLen))
}

// checkActivity is checkID for an activity that may be a variant's
// activity string "a/v" (stock.VariantOf): both parts [order.ValidID], at
// most [order.MaxIDLen] bytes in all, as an order line's activity.
func checkActivity(id string) error {
	if a, v, ok := strings.Cut(id, "/"); ok && len(id) <= order.MaxIDLen && order.ValidID(a) && order.ValidID(v) {
		return nil
	}
	return checkID("activity", id)
}
