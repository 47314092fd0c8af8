package reconcile

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/order/status"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

// Refunds in the reconciler: a refund restocked to the sale gave its units
// back (DB stock), so it is not sold and its reservation, if its release
// was lost, is released; a refund without a restock (or to the shop) stays
// sold and matched. The conservation holds in each case, and
// LiveReservations lists the reservations still held.
func TestReconcilerCountsRefunds(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		addActivity(t, db, "1", 10, 1)
		clock := newClock()
		led := newLedger()
		p, err := order.NewProcessor(db, newGen(t, 1), order.WithClock(clock))
		require.NoError(t, err)
		var nos []string
		for i := 0; i < 4; i++ {
			m := msg(i, "1", num(100+i))
			led.reserve("1", Reservation{ID: m.ReservationID, User: m.UserID, Qty: 1, At: clock.Now()})
			out, err := p.Handle(ctx, m)
			require.NoError(t, err)
			nos = append(nos, out.OrderNo)
		}
		lost := order.ReleaserFunc(func(context.Context, string, string) error { return errors.New("lost") })
		canc, err := status.NewCanceller(db, nil, lost, status.WithClock(clock))
		require.NoError(t, err)
		for i, no := range nos[:3] {
			require.NoError(t, canc.PayRef(ctx, no, status.Payment{Provider: "stripe", Reference: fmt.Sprint("pi_", i)}))
		}
		require.ErrorIs(t, canc.Refund(ctx, nos[0], status.RestockSale), status.ErrReleasePending)
		require.NoError(t, canc.Refund(ctx, nos[1], status.RestockNone))

		rec, err := NewReconciler(db, led.Reservations, led, WithClock(clock))
		require.NoError(t, err)
		rep, err := rec.Reconcile(ctx, "1")
		require.NoError(t, err)
		assert.Equal(t, []string{"r-0"}, rep.Released, "the refund's lost release is repaired")
		assert.Equal(t, 3, rep.Matched)
		assert.Equal(t, 3, rep.LiveOrders, "paid, refunded without restock, created")
		assert.EqualValues(t, 3, rep.SoldUnits)
		assert.EqualValues(t, 7, rep.DBStock)
		assert.True(t, rep.Conserved)
		assert.Zero(t, rep.Drift)
		assert.Equal(t, 1, led.releases())

		live, err := LiveReservations(ctx, db, "1")
		require.NoError(t, err)
		var ids []string
		for _, r := range live {
			ids = append(ids, r.ID)
		}
		assert.ElementsMatch(t, []string{"r-1", "r-2", "r-3"}, ids, "a refund without restock still holds its units")
	})
}
