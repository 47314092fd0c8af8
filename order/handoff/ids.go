package handoff

import (
	"fmt"

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
