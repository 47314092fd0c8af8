package app

import (
	"context"
	"errors"

	"github.com/seckillkit/seckill/order"
)

// cancellerOptions wires the unpaid-order cancellation into the consumer.
// TODO(fullstack): order.Canceller and order.Reconciler are not on main yet.
func (a *App) cancellerOptions(ctx context.Context, proc *order.Processor, rel order.Releaser) []order.Option {
	a.parts.pay = func(ctx context.Context, orderNo string) error { return errors.New("pay: not wired yet") }
	return nil
}
