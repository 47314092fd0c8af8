package reconcile

import (
	"context"
	"errors"
	"testing"

	"github.com/seckillkit/seckill/order"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

// Report.Released lists only the releases that took effect: a release that
// failed is in ReleaseErrors alone (before, it was in both, so a caller
// counting Released reported units given back that were still held).
func TestReconcilerFailedReleaseNotInReleased(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		addActivity(t, db, "1", 10, 1)
		clock := newClock()
		led := newLedger()
		led.reserve("1", Reservation{ID: "r-ok", User: "101", Qty: 1, At: clock.Now()})
		led.reserve("1", Reservation{ID: "r-bad", User: "102", Qty: 1, At: clock.Now()})
		rel := order.ReleaserFunc(func(ctx context.Context, activity, id string) error {
			if id == "r-bad" {
				return errors.New("redis down")
			}
			return led.Release(ctx, activity, id)
		})
		rec, err := NewReconciler(db, led.Reservations, rel, WithClock(clock), WithGrace(0))
		require.NoError(t, err)
		rep, err := rec.Reconcile(ctx, "1")
		require.NoError(t, err)
		assert.Equal(t, []string{"r-ok"}, rep.Released)
		require.Len(t, rep.ReleaseErrors, 1)
		assert.Error(t, rep.ReleaseErrors["r-bad"])
		assert.Equal(t, 1, led.releases())
	})
}
