package status

import (
	"context"

	"github.com/seckillkit/seckill/order"
)

// OrderReleaser is an optional interface of a [order.Releaser]: the [Canceller]
// calls ReleaseOrder, with the cancelled order, instead of Release, so the
// releaser knows the reservation was made (by o.CreatedAt) and can tell a
// reservation Redis lost from one never made (stock.Deductor's
// ReleaseReserved). An error makes the Canceller retry the release later
// ([ErrReleasePending]).
type OrderReleaser interface {
	ReleaseOrder(ctx context.Context, o order.Order) error
}
