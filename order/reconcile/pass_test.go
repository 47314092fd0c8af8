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
)

// The pending pass is asked once per Reconcile, only when a reservation is
// past the grace without an order; a reservation it or the per-reservation
// Pending reports is kept however old, the rest is released; a pass that
// fails releases nothing without an order. Counted from the ledger.
func TestPendingPass(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		clock := newClock()
		addActivity(t, db, "1", 10, 1)
		led := newLedger()
		for i, id := range []string{"r-kafka", "r-outbox", "r-gone"} {
			led.reserve("1", Reservation{ID: id, User: num(100 + i), Qty: 1, At: clock.Now()})
		}
		var passes int
		var failPass error
		pass := PendingPass(func(_ context.Context, activity string) (Pending, error) {
			passes++
			if activity != "1" {
				return nil, errors.New("wrong activity " + activity)
			}
			if failPass != nil {
				return nil, failPass
			}
			return func(_ context.Context, id string) (bool, error) { return id == "r-kafka", nil }, nil
		})
		outbox := Pending(func(_ context.Context, id string) (bool, error) { return id == "r-outbox", nil })
		rec, err := NewReconciler(db, led.Reservations, led, WithClock(clock), WithGrace(time.Minute),
			WithPending(outbox), WithPendingPass(pass))
		require.NoError(t, err)

		// in the grace: the pass is not asked
		rep, err := rec.Reconcile(ctx, "1")
		require.NoError(t, err)
		assert.Equal(t, 0, passes)
		assert.Len(t, rep.InGrace, 3)

		// a pass that fails releases nothing without an order
		clock.Add(time.Minute)
		failPass = errors.New("broker down")
		rep, err = rec.Reconcile(ctx, "1")
		require.NoError(t, err)
		assert.Equal(t, 1, passes, "one pass per Reconcile")
		assert.Empty(t, rep.Released)
		assert.Len(t, rep.ReleaseErrors, 2, "r-outbox is pending by the outbox before the pass is asked")
		assert.Equal(t, 0, led.releases())

		// 10 graces later: what is still on its way is kept, the rest released
		failPass = nil
		for range 10 {
			clock.Add(time.Minute)
			rep, err = rec.Reconcile(ctx, "1")
			require.NoError(t, err)
		}
		assert.Equal(t, 11, passes, "one pass per Reconcile")
		assert.Equal(t, []string{"r-kafka", "r-outbox"}, rep.Pending)
		assert.Equal(t, map[string]int{"r-gone": 1}, led.releasedByID())
		n, outcome, reason := dedupRows(t, db, "r-gone")
		assert.EqualValues(t, 1, n)
		assert.Equal(t, string(order.StatusFailed), outcome, reason)

		_, err = NewReconciler(db, led.Reservations, led, WithPendingPass(nil))
		assert.ErrorIs(t, err, order.ErrInvalidConfig)
	})
}
