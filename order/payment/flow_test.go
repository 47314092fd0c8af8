package payment

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/order/status"
)

// Capture pays the order, then captures; a provider that fails, times
// out (the capture happened, the answer was lost) or answers a retry
// again is retried with the same key, and captures once.
func TestFlowCaptureRetriesFailuresAndTimeouts(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		f := newFixture(t, db, 10, 3)
		f.prov.fail["capture:"+f.resv[f.nos[0]]] = true
		err := f.flow.Capture(ctx, f.nos[0])
		require.ErrorIs(t, err, errProviderDown)
		assert.Equal(t, order.OrderPaid, f.order(t, f.nos[0]).Status, "paid, not captured yet")
		assert.Equal(t, "authorized", f.prov.stateOf(f.resv[f.nos[0]]))
		require.NoError(t, f.flow.Capture(ctx, f.nos[0]), "the retry captures")

		f.prov.timeout["capture:"+f.resv[f.nos[1]]] = true
		require.ErrorIs(t, f.flow.Capture(ctx, f.nos[1]), context.DeadlineExceeded)
		require.NoError(t, f.flow.Capture(ctx, f.nos[1]), "the retry gets the first answer")
		require.NoError(t, f.flow.Capture(ctx, f.nos[1]), "and again")
		assert.Equal(t, 2, f.prov.calls["capture"], "each captured once")
		assert.GreaterOrEqual(t, f.prov.replays, 2)

		// the third order expires: the cancellation voids; a capture after it captures nothing
		n, err := f.cLate.ScanExpired(ctx)
		require.NoError(t, err)
		assert.Equal(t, 1, n)
		assert.ErrorIs(t, f.flow.Capture(ctx, f.nos[2]), status.ErrOrderCancelled)
		assert.Equal(t, 1, f.prov.calls["void"])

		// a refund restocked to the sale releases without voiding the captured payment
		require.NoError(t, f.c.Refund(ctx, f.nos[0], status.RestockSale))
		assert.Equal(t, 1, f.prov.calls["void"])
		f.check(t)
	})
}

// A void that fails leaves the cancellation's release pending; the retry
// voids once.
func TestFlowVoidFailureRetried(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		f := newFixture(t, db, 10, 1)
		f.prov.fail["void:"+f.resv[f.nos[0]]] = true
		assert.ErrorIs(t, f.c.Cancel(ctx, f.nos[0]), status.ErrReleasePending)
		assert.ErrorIs(t, f.c.Cancel(ctx, f.nos[0]), status.ErrAlreadyCancelled)
		assert.Equal(t, 1, f.prov.calls["void"])
		f.check(t)
	})
}

func TestFlowAuthorize(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		f := newFixture(t, db, 10, 0)
		a := Authorization{Activity: "1", User: "7", ReservationID: "r-x", Amount: 990}
		f.prov.timeout["authorize:r-x"] = true
		assert.ErrorIs(t, f.flow.Authorize(ctx, a), context.DeadlineExceeded)
		require.NoError(t, f.flow.Authorize(ctx, a), "the retry gets the first answer")
		assert.Equal(t, 1, f.prov.calls["authorize"])
		assert.ErrorIs(t, f.flow.Authorize(ctx, Authorization{}), order.ErrInvalidArgument)
		// the reservation released (say, the hand-off failed): the authorization is voided
		require.NoError(t, f.flow.Releaser(f.rs).Release(ctx, "1", "r-x"))
		assert.Equal(t, "voided", f.prov.stateOf("r-x"))
		_, err := NewFlow("", f.prov, f.c, f.orders)
		assert.ErrorIs(t, err, order.ErrInvalidConfig)
		_, err = NewFlow("p", nil, f.c, f.orders)
		assert.ErrorIs(t, err, order.ErrInvalidConfig)
	})
}

// Capture vs void: each order is captured twice while cancellations and
// an expiry scan void it. The order's CAS decides: exactly one terminal
// state per order, the provider saw a capture or a void (never both), and
// the units of a cancelled order came back once, in Redis and in SQL.
func TestCaptureRacingVoid(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		const n = 30
		var late atomic.Int64
		f := newFixture(t, db, 50, n, status.WithOnPayCancelled(func(context.Context, order.Order) { late.Add(1) }))
		var captured, lost atomic.Int64
		var wg sync.WaitGroup
		for _, no := range f.nos {
			for range 2 {
				wg.Go(func() {
					switch err := f.flow.Capture(ctx, no); {
					case err == nil:
						captured.Add(1)
					case errors.Is(err, status.ErrOrderCancelled):
						lost.Add(1)
					default:
						t.Error(err)
					}
				})
			}
			wg.Go(func() {
				if err := f.c.Cancel(ctx, no); err != nil && !errors.Is(err, status.ErrAlreadyPaid) && !errors.Is(err, status.ErrAlreadyCancelled) {
					t.Error(err)
				}
			})
		}
		wg.Go(func() {
			if _, err := f.cLate.ScanExpired(ctx); err != nil {
				t.Error(err)
			}
		})
		wg.Wait()
		var paid, cancelled int
		for _, no := range f.nos {
			switch f.order(t, no).Status {
			case order.OrderPaid:
				paid++
			case order.OrderCancelled:
				cancelled++
			}
		}
		assert.Equal(t, n, paid+cancelled, "every order ended paid or cancelled")
		assert.EqualValues(t, 2*paid, captured.Load())
		assert.Equal(t, paid, f.prov.calls["capture"])
		assert.Equal(t, cancelled, f.prov.calls["void"])
		f.check(t)
	})
}
