package order_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/order/handoff"
	"github.com/seckillkit/seckill/order/internal/dbx"
	"github.com/seckillkit/seckill/order/operate"
	"github.com/seckillkit/seckill/order/reconcile"
	"github.com/seckillkit/seckill/order/status"
)

// rowCount counts the rows of table (optionally WHERE where) with raw SQL.
func rowCount(t testing.TB, db *gorm.DB, table, where string, args ...any) int64 {
	t.Helper()
	q := "SELECT COUNT(*) FROM " + dbx.QuoteIdent(db, table)
	if where != "" {
		q += " WHERE " + where
	}
	var n int64
	require.NoError(t, db.Raw(q, args...).Scan(&n).Error)
	return n
}

// stockIn reads an activity's stock from tabs' activity table with raw SQL.
func stockIn(t testing.TB, db *gorm.DB, tabs order.Tables, act string) int64 {
	t.Helper()
	var n int64
	require.NoError(t, db.Raw("SELECT stock FROM "+dbx.QuoteIdent(db, tabs.Activity)+" WHERE id = ?", act).Scan(&n).Error)
	return n
}

// tableCounts is what one configuration holds: orders (all, live), dedup
// rows, and activity 1's stock.
type tableCounts struct{ Orders, Live, Dedup, Stock int64 }

func countsIn(t testing.TB, db *gorm.DB, tabs order.Tables) tableCounts {
	t.Helper()
	return tableCounts{
		Orders: rowCount(t, db, tabs.Order, ""),
		Live:   rowCount(t, db, tabs.Order, "status <> ?", order.OrderCancelled),
		Dedup:  rowCount(t, db, tabs.Dedup, ""),
		Stock:  stockIn(t, db, tabs, "1"),
	}
}

// Two configurations — the default tables and three other names, one of
// them the reserved word "order" — side by side in one database: every
// component writes and reads only its own tables, message IDs and
// reservations are unique per configuration, and the index names do not
// collide (they are per schema on PostgreSQL and SQLite).
func TestTwoTableConfigurationsSideBySide(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		def, other := defaultTables(), otherTables
		optB := order.WithTables(other)
		require.NoError(t, order.AutoMigrate(ctx, db, optB))
		require.NoError(t, order.AutoMigrate(ctx, db, optB), "idempotent")
		addActivityIn(t, db, def, "1", 10, 1)
		addActivityIn(t, db, other, "1", 20, 2)
		clock := newClock()
		pA, err := order.NewProcessor(db, newGenOn(t, 1, clock), order.WithClock(clock))
		require.NoError(t, err)
		pB, err := order.NewProcessor(db, newGenOn(t, 2, clock), order.WithClock(clock), optB)
		require.NoError(t, err)
		tb, err := order.TablesOf(optB)
		require.NoError(t, err)
		assert.Equal(t, other, tb)

		// A batch of 6 in A; the same message IDs and reservations in B,
		// where they are new: 4 by batch, 2 one by one.
		var msgs []order.Message
		for i := 0; i < 6; i++ {
			msgs = append(msgs, msg(i, "1", num(100+i)))
		}
		for _, o := range mustProcess(t, pA, msgs) {
			require.Equal(t, order.StatusSuccess, o.Status)
			require.False(t, o.Duplicate)
		}
		for _, o := range mustProcess(t, pB, msgs[:4]) {
			require.Equal(t, order.StatusSuccess, o.Status)
			require.False(t, o.Duplicate, "a message ID of A is new in B")
		}
		for _, m := range msgs[4:] {
			o, err := pB.Handle(ctx, m)
			require.NoError(t, err)
			require.Equal(t, order.StatusSuccess, o.Status)
		}
		// B's cap is 2: a second unit for user 100 in B, refused in A (cap 1).
		m := msg(50, "1", "100")
		o, err := pB.Handle(ctx, m)
		require.NoError(t, err)
		assert.Equal(t, order.StatusSuccess, o.Status)
		o, err = pA.Handle(ctx, m)
		require.NoError(t, err)
		assert.Equal(t, order.StatusFailed, o.Status)
		assert.Equal(t, order.ReasonDuplicate, o.Reason)
		// redeliveries are answered from each configuration's own dedup rows
		for _, o := range mustProcess(t, pB, msgs) {
			assert.True(t, o.Duplicate)
		}
		assert.Equal(t, tableCounts{Orders: 6, Live: 6, Dedup: 7, Stock: 4}, countsIn(t, db, def))
		assert.Equal(t, tableCounts{Orders: 7, Live: 7, Dedup: 7, Stock: 13}, countsIn(t, db, other))

		// Canceller: B cancels in B only (its stock comes back), A pays in A.
		rel := newLedger()
		cA, err := status.NewCanceller(db, nil, rel, status.WithClock(clock))
		require.NoError(t, err)
		cB, err := status.NewCanceller(db, nil, rel, status.WithClock(clock), status.WithTables(other))
		require.NoError(t, err)
		noB := orderNoIn(t, db, other, "r-0")
		noA := orderNoIn(t, db, def, "r-0")
		require.NotEqual(t, noA, noB)
		require.NoError(t, cB.Cancel(ctx, noB))
		require.ErrorIs(t, cA.Cancel(ctx, noB), status.ErrOrderNotFound)
		require.NoError(t, cA.Pay(ctx, noA))
		assert.Equal(t, tableCounts{Orders: 6, Live: 6, Dedup: 7, Stock: 4}, countsIn(t, db, def))
		assert.Equal(t, tableCounts{Orders: 7, Live: 6, Dedup: 7, Stock: 14}, countsIn(t, db, other))
		assert.EqualValues(t, 1, rowCount(t, db, def.Order, "status = ?", order.OrderPaid))
		assert.EqualValues(t, 0, rowCount(t, db, other.Order, "status = ?", order.OrderPaid))
		// the scan of B cancels B's expired orders only
		clock.Add(31 * time.Minute)
		n, err := cB.ScanExpired(ctx)
		require.NoError(t, err)
		assert.Equal(t, 6, n)
		assert.Equal(t, tableCounts{Orders: 7, Live: 0, Dedup: 7, Stock: 20}, countsIn(t, db, other))
		assert.Equal(t, tableCounts{Orders: 6, Live: 6, Dedup: 7, Stock: 4}, countsIn(t, db, def))

		// LiveReservations, the Fence, the Results' DB fallback, the
		// Reconciler and PruneDedup follow the option.
		live, err := reconcile.LiveReservations(ctx, db, "1")
		require.NoError(t, err)
		assert.Len(t, live, 6)
		live, err = reconcile.LiveReservations(ctx, db, "1", optB)
		require.NoError(t, err)
		assert.Empty(t, live)

		fB, err := handoff.NewFence(db, rel, handoff.WithClock(clock), handoff.WithTables(other))
		require.NoError(t, err)
		require.NoError(t, fB.ReleaseFor(ctx, handoff.ReleaseRequest{Activity: "1", User: "300", ReservationID: "r-fenced"}))
		assert.EqualValues(t, 1, rowCount(t, db, other.Dedup, "reservation_id = ?", "r-fenced"))
		assert.EqualValues(t, 0, rowCount(t, db, def.Dedup, "reservation_id = ?", "r-fenced"))
		fA, err := handoff.NewFence(db, rel, handoff.WithClock(clock))
		require.NoError(t, err)
		require.ErrorIs(t, fA.Release(ctx, "1", "r-1"), handoff.ErrConsumed, "r-1 has an order in A")

		rdb := testenv.Redis(t)
		for _, tc := range []struct {
			opts []status.ResultsOption
			want order.Status
		}{{nil, order.StatusSuccess}, {[]status.ResultsOption{status.WithTables(other)}, order.StatusFailed}} {
			res, err := status.NewResults(rdb, db, append([]status.ResultsOption{status.WithKeyPrefix(testenv.Prefix(t))}, tc.opts...)...)
			require.NoError(t, err)
			got, err := res.Get(ctx, "1", "101")
			require.NoError(t, err)
			assert.Equal(t, tc.want, got.Status, "A: live order; B: cancelled")
		}

		led := newLedger()
		led.reserve("1", Reservation{ID: "r-2", User: "102", Qty: 1, At: clock.Now()})
		recB, err := reconcile.NewReconciler(db, led.Reservations, led, reconcile.WithClock(clock), reconcile.WithDryRun(true), reconcile.WithTables(other))
		require.NoError(t, err)
		rep, err := recB.Reconcile(ctx, "1")
		require.NoError(t, err)
		assert.Equal(t, reconcile.Report{Activity: "1", DryRun: true, Reservations: 1, ReservedUnits: 1, DBStock: 20, TotalStock: 20,
			Conserved: true, Released: []string{"r-2"}, ReleaseErrors: map[string]error{}}, rep)
		recA, err := reconcile.NewReconciler(db, led.Reservations, led, reconcile.WithClock(clock), reconcile.WithDryRun(true))
		require.NoError(t, err)
		rep, err = recA.Reconcile(ctx, "1")
		require.NoError(t, err)
		assert.Equal(t, 6, rep.LiveOrders)
		assert.Equal(t, 1, rep.Matched)

		pruned, err := operate.PruneDedup(ctx, db, clock.Now().Add(time.Second), 100, optB)
		require.NoError(t, err)
		assert.EqualValues(t, 8, pruned)
		assert.EqualValues(t, 0, rowCount(t, db, other.Dedup, ""))
		assert.EqualValues(t, 7, rowCount(t, db, def.Dedup, ""))
	})
}

func mustProcess(t testing.TB, p *order.Processor, msgs []order.Message) []order.Outcome {
	t.Helper()
	outs, err := p.Process(context.Background(), msgs)
	require.NoError(t, err)
	return outs
}

// orderNoIn reads the order number of a reservation in tabs with raw SQL.
func orderNoIn(t testing.TB, db *gorm.DB, tabs order.Tables, resv string) string {
	t.Helper()
	var no string
	require.NoError(t, db.Raw("SELECT order_no FROM "+dbx.QuoteIdent(db, tabs.Order)+" WHERE reservation_id = ?", resv).Scan(&no).Error)
	require.NotEmpty(t, no, fmt.Sprintf("no order for %s in %s", resv, tabs.Order))
	return no
}
