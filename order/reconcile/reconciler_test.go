package reconcile

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/order/status"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

func TestReconcilerRepairsLostMessage(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		addActivity(t, db, "1", 10, 1)
		clock := newClock()
		led := newLedger()
		p, err := order.NewProcessor(db, newGen(t, 1), order.WithClock(clock))
		require.NoError(t, err)
		c, err := order.NewConsumer(p, led)
		require.NoError(t, err)

		// 6 reservations accepted; the message of r-5 is lost (never published).
		accepted := 6
		var kms []order.Record
		for i := 0; i < accepted; i++ {
			m := msg(i, "1", num(100+i))
			led.reserve("1", Reservation{ID: m.ReservationID, User: m.UserID, Qty: 1, At: clock.Now()})
			if i != 5 {
				kms = append(kms, kmsg(t, int64(i), m))
			}
		}
		require.NoError(t, runClaim(t, c, &fakeSession{ctx: ctx}, kms))
		// r-6: a fresh reservation whose message is still in flight.
		led.reserve("1", Reservation{ID: "r-6", User: "106", Qty: 1, At: clock.Now().Add(9 * time.Minute)})
		// r-7: message waiting in the outbox.
		led.reserve("1", Reservation{ID: "r-7", User: "107", Qty: 1, At: clock.Now()})
		// an order whose reservation Redis lost
		out, err := p.Handle(ctx, msg(8, "1", "108"))
		require.NoError(t, err)
		// a cancelled order whose release was lost
		canc, err := status.NewCanceller(db, nil, order.ReleaserFunc(func(context.Context, string, string) error { return errors.New("lost") }))
		require.NoError(t, err)
		require.ErrorIs(t, canc.Cancel(ctx, mustOrderNo(t, db, "r-0")), status.ErrReleasePending)

		clock.Add(10*time.Minute + time.Second)
		pending := Pending(func(_ context.Context, id string) (bool, error) { return id == "r-7", nil })

		dry, err := NewReconciler(db, led.Reservations, led, WithClock(clock), WithPending(pending), WithDryRun(true))
		require.NoError(t, err)
		rep, err := dry.Reconcile(ctx, "1")
		require.NoError(t, err)
		assert.True(t, rep.DryRun)
		assert.Equal(t, []string{"r-0", "r-5"}, rep.Released)
		assert.Equal(t, 0, led.releases(), "dry run releases nothing")

		rec, err := NewReconciler(db, led.Reservations, led, WithClock(clock), WithPending(pending))
		require.NoError(t, err)
		rep, err = rec.Reconcile(ctx, "1")
		require.NoError(t, err)
		assert.Equal(t, 8, rep.Reservations)
		assert.Equal(t, []string{"r-0", "r-5"}, rep.Released)
		assert.Equal(t, []string{"r-6"}, rep.InGrace)
		assert.Equal(t, []string{"r-7"}, rep.Pending)
		assert.Equal(t, []string{out.OrderNo}, rep.Orphans)
		assert.Equal(t, 4, rep.Matched) // r-1..r-4
		assert.Equal(t, 5, rep.LiveOrders)
		assert.EqualValues(t, 5, rep.SoldUnits)
		assert.True(t, rep.Conserved)
		assert.Empty(t, rep.ReleaseErrors)
		assert.Equal(t, 2, led.releases())
		// counts: of the 6 accepted, 4 are live orders (r-1..r-4), 2 released (r-0, r-5)
		assert.EqualValues(t, accepted-led.releases(), countOrders(t, db, "status <> ? AND reservation_id IN ?",
			order.OrderCancelled, []string{"r-0", "r-1", "r-2", "r-3", "r-4", "r-5"}))
		checkConservation(t, db, "1", 10)

		// a second run finds nothing more to do
		rep, err = rec.Reconcile(ctx, "1")
		require.NoError(t, err)
		assert.Empty(t, rep.Released)
		assert.Equal(t, 2, led.releases())
	})
}

func mustOrderNo(t *testing.T, db *gorm.DB, resv string) string {
	t.Helper()
	var o order.Order
	require.NoError(t, db.Where("reservation_id = ?", resv).First(&o).Error)
	return o.OrderNo
}

func TestReconcilerLedgerError(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		rec, err := NewReconciler(db, Ledger(func(context.Context, string, uint64, int64) ([]Reservation, uint64, error) {
			return nil, 0, errors.New("redis down")
		}), newLedger())
		require.NoError(t, err)
		_, err = rec.Reconcile(context.Background(), "1")
		require.Error(t, err)
	})
}

func TestReconcilerPagesLedger(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		addActivity(t, db, "1", 10, 1)
		clock := newClock()
		all := []Reservation{{ID: "a", Qty: 1}, {ID: "b", Qty: 1}, {ID: "c", Qty: 2}}
		var cursors []uint64
		pages := Ledger(func(_ context.Context, _ string, cursor uint64, _ int64) ([]Reservation, uint64, error) {
			cursors = append(cursors, cursor)
			if cursor >= uint64(len(all)-1) {
				return all[cursor:], 0, nil
			}
			return all[cursor : cursor+1], cursor + 1, nil
		})
		rec, err := NewReconciler(db, pages, newLedger(), WithClock(clock), WithDryRun(true), WithGrace(0))
		require.NoError(t, err)
		rep, err := rec.Reconcile(context.Background(), "1")
		require.NoError(t, err)
		assert.Equal(t, []uint64{0, 1, 2}, cursors)
		assert.Equal(t, 3, rep.Reservations)
		assert.EqualValues(t, 4, rep.ReservedUnits)
		assert.Equal(t, []string{"a", "b", "c"}, rep.Released)
	})
}

// A missing activity row is not "DB stock 0, no orders": the DB cannot
// vouch for the ledger (wrong database, row deleted, wrong ID), so nothing
// is released and the report says why.
func TestReconcilerActivityMissing(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		addActivity(t, db, "1", 10, 1) // another activity exists
		clock := newClock()
		led := newLedger()
		for i := 0; i < 3; i++ {
			led.reserve("2", Reservation{ID: fmt.Sprint("r-", i), User: num(100 + i), Qty: 1, At: clock.Now()})
		}
		clock.Add(time.Hour) // far past the grace period
		for _, dry := range []bool{true, false} {
			rec, err := NewReconciler(db, led.Reservations, led, WithClock(clock), WithDryRun(dry))
			require.NoError(t, err)
			rep, err := rec.Reconcile(ctx, "2")
			require.ErrorIs(t, err, order.ErrActivityNotFound, "dry run %v", dry)
			assert.True(t, rep.ActivityMissing)
			assert.Equal(t, 3, rep.Reservations, "the ledger is still reported")
			assert.EqualValues(t, 3, rep.ReservedUnits)
			assert.Empty(t, rep.Released, "nothing released for a missing activity")
			assert.False(t, rep.Conserved, "no claim of conservation without the row")
		}
		assert.Equal(t, 0, led.releases())

		// the existing activity still reconciles normally
		rep, err := newReconcilerMust(t, db, led, clock).Reconcile(ctx, "1")
		require.NoError(t, err)
		assert.False(t, rep.ActivityMissing)
		assert.True(t, rep.Conserved)
	})
}

func newReconcilerMust(t *testing.T, db *gorm.DB, led *ledger, clock order.Clock) *Reconciler {
	t.Helper()
	rec, err := NewReconciler(db, led.Reservations, led, WithClock(clock))
	require.NoError(t, err)
	return rec
}
