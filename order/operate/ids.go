package operate

import (
	"fmt"
	"strings"

	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/order/internal/dbx"
)

// checkID returns nil for a valid activity ID — an [order.ValidID], or a
// variant's "a/v" (stock.VariantOf: a sale in sizes, each size its own
// activity row) whose two parts are ValidID, at most [order.MaxIDLen]
// bytes in all — else an error wrapping [order.ErrInvalidID] that never
// echoes an over-long ID.
func checkID(what, id string) error {
	if order.ValidID(id) {
		return nil
	}
	if a, v, ok := strings.Cut(id, "/"); ok && len(id) <= order.MaxIDLen && order.ValidID(a) && order.ValidID(v) {
		return nil
	}
	return fmt.Errorf("%w: %s %s", order.ErrInvalidID, what, dbx.DescribeID(id, order.MaxIDLen))
}
