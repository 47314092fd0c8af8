package reconcile

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/order/handoff"
	"github.com/seckillkit/seckill/order/status"
)

// The reconciler counts order lines per activity (a variant "s/M" too):
// sold units = live plain orders + live lines, so DB stock + sold = total;
// each line is its own reservation "<id>#<i>": matched while live,
// released when cancelled and its release was lost, and fenced then
// released when its cart never became an order (the late cart is then
// refused). The order row of a cart is never an orphan.
func TestReconcileCountsLines(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		addActivity(t, db, "s", 0, 10)
		addActivity(t, db, "s/M", 10, 10)
		addActivity(t, db, "b", 10, 10)
		clock := newClock()
		led := newLedger()
		p, err := order.NewProcessor(db, newGen(t, 1), order.WithClock(clock))
		require.NoError(t, err)
		cart := func(i int, user string, mQty, bQty int64) order.Message {
			m := msg(i, "s", user)
			m.Version, m.Qty = order.MessageVersion, 0
			m.Lines = []order.Line{{ActivityID: "s/M", Qty: mQty}, {ActivityID: "b", Qty: bQty}}
			led.reserve("s/M", Reservation{ID: m.ReservationID + "#0", User: user, Qty: mQty, At: clock.Now()})
			led.reserve("b", Reservation{ID: m.ReservationID + "#1", User: user, Qty: bQty, At: clock.Now()})
			return m
		}
		handle := func(m order.Message) order.Outcome {
			out, err := p.Handle(ctx, m)
			require.NoError(t, err)
			return out
		}
		require.Equal(t, order.StatusSuccess, handle(cart(1, "u1", 1, 2)).Status)
		c2 := handle(cart(2, "u2", 2, 1))
		require.Equal(t, order.StatusSuccess, c2.Status)
		lost := cart(3, "u3", 1, 1) // its message never arrives (until the end)
		plain := msg(4, "b", "u4")
		led.reserve("b", Reservation{ID: plain.ReservationID, User: "u4", Qty: 1, At: clock.Now()})
		require.Equal(t, order.StatusSuccess, handle(plain).Status)
		canc, err := status.NewCanceller(db, nil, order.ReleaserFunc(func(context.Context, string, string) error { return errors.New("lost") }))
		require.NoError(t, err)
		require.ErrorIs(t, canc.CancelLine(ctx, c2.OrderNo, 0), status.ErrReleasePending)

		clock.Add(10*time.Minute + time.Second)
		r, err := NewReconciler(db, led.Reservations, led, WithClock(clock))
		require.NoError(t, err)

		rep, err := r.Reconcile(ctx, "s/M")
		require.NoError(t, err)
		assert.Equal(t, 1, rep.LiveOrders, "cart 1's line 0")
		assert.EqualValues(t, 1, rep.SoldUnits)
		assert.EqualValues(t, 9, rep.DBStock, "10 - 1 - 2 + 2 (line cancelled)")
		assert.True(t, rep.Conserved, "%+v", rep)
		assert.Equal(t, 1, rep.Matched)
		assert.Equal(t, []string{"r-2#0", "r-3#0"}, rep.Released)
		assert.Empty(t, rep.Orphans)

		rep, err = r.Reconcile(ctx, "b")
		require.NoError(t, err)
		assert.Equal(t, 3, rep.LiveOrders, "two lines and a plain order")
		assert.EqualValues(t, 4, rep.SoldUnits)
		assert.EqualValues(t, 6, rep.DBStock)
		assert.True(t, rep.Conserved, "%+v", rep)
		assert.Equal(t, 3, rep.Matched)
		assert.Equal(t, []string{"r-3#1"}, rep.Released)

		rep, err = r.Reconcile(ctx, "s")
		require.NoError(t, err)
		assert.Empty(t, rep.Orphans, "a cart's order row holds no reservation of its own")
		assert.True(t, rep.Conserved)

		// Counted again: the ledger holds exactly the live lines' units.
		for act, sold := range map[string]int64{"s/M": 1, "b": 4} {
			rep, err = r.Reconcile(ctx, act)
			require.NoError(t, err)
			assert.Equal(t, sold, rep.ReservedUnits, act)
			assert.Equal(t, rep.SoldUnits, rep.ReservedUnits, act)
			assert.Empty(t, rep.Released, act)
		}
		assert.Equal(t, map[string]int{"r-2#0": 1, "r-3#0": 1, "r-3#1": 1}, led.releasedByID())

		out := handle(lost)
		assert.Equal(t, order.StatusFailed, out.Status, "the lost cart, fenced, arrives late")
		assert.Equal(t, handoff.ReasonReleased, out.Reason)
		assert.EqualValues(t, 9, dbStockOf(t, db, "s/M"))

		live, err := LiveReservations(ctx, db, "s/M")
		require.NoError(t, err)
		require.Len(t, live, 1)
		assert.Equal(t, "r-1#0", live[0].ID)
		assert.Equal(t, "u1", live[0].User)
		_, err = LiveReservations(ctx, db, "s/M/x")
		assert.ErrorIs(t, err, order.ErrInvalidID)
	})
}

func dbStockOf(t testing.TB, db *gorm.DB, act string) int64 {
	t.Helper()
	var a order.Activity
	require.NoError(t, db.Where("id = ?", act).First(&a).Error)
	return a.Remaining
}
