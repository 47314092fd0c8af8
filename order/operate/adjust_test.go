package operate

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/order/internal/dbx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

// stockRow reads an activity's stock, total_stock and status with raw SQL.
func stockRow(t testing.TB, db *gorm.DB, tabs order.Tables, act string) (stock, total int64, status int64) {
	t.Helper()
	var r struct{ Stock, TotalStock, Status int64 }
	require.NoError(t, db.Raw("SELECT stock, total_stock, status FROM "+dbx.QuoteIdent(db, tabs.Activity)+" WHERE id = ?", act).Scan(&r).Error)
	return r.Stock, r.TotalStock, r.Status
}

// liveUnitsSQL sums the live orders' units of an activity with raw SQL.
func liveUnitsSQL(t testing.TB, db *gorm.DB, tabs order.Tables, act string) int64 {
	t.Helper()
	var n int64
	require.NoError(t, db.Raw("SELECT COALESCE(SUM(qty), 0) FROM "+dbx.QuoteIdent(db, tabs.Order)+" WHERE activity_id = ? AND status <> ?",
		act, order.OrderCancelled).Scan(&n).Error)
	return n
}

// checkLedger asserts stock + live orders = total_stock = initial + Σ
// adjustment deltas, all read with SQL.
func checkLedger(t testing.TB, db *gorm.DB, tabs order.Tables, act string, initial int64) {
	t.Helper()
	stock, total, _ := stockRow(t, db, tabs, act)
	var deltas int64
	require.NoError(t, db.Raw("SELECT COALESCE(SUM(delta), 0) FROM "+dbx.QuoteIdent(db, tabs.Adjust)+" WHERE activity_id = ?", act).
		Scan(&deltas).Error)
	assert.Equal(t, total, stock+liveUnitsSQL(t, db, tabs, act), "stock + live orders = total_stock")
	assert.Equal(t, initial+deltas, total, "total_stock = initial + adjustments")
}

func TestAdjustStockTopUpWithdrawReplayRefusal(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		tabs := defaultTables()
		addActivity(t, db, "sale-1", 10, 1)
		p := newProc(t, db)
		for _, o := range mustProcess(t, p, []order.Message{msg(1, "sale-1", "u1"), msg(2, "sale-1", "u2"), msg(3, "sale-1", "u3")}) {
			require.Equal(t, order.StatusSuccess, o.Status)
		}
		checkLedger(t, db, tabs, "sale-1", 10)

		at := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
		up, err := AdjustStock(ctx, db, AdjustParams{Activity: "sale-1", ID: "topup-1", Delta: 5, Operator: "ann", Reason: "more units", At: at})
		require.NoError(t, err)
		assert.False(t, up.Replay)
		assert.Equal(t, Adjustment{AdjustID: "topup-1", ActivityID: "sale-1", Delta: 5, Operator: "ann", Reason: "more units", CreatedAt: at}, up)
		stock, total, _ := stockRow(t, db, tabs, "sale-1")
		assert.Equal(t, [2]int64{12, 15}, [2]int64{stock, total})

		down, err := AdjustStock(ctx, db, AdjustParams{Activity: "sale-1", ID: "withdraw-1", Delta: -4, Operator: "bob"})
		require.NoError(t, err)
		assert.EqualValues(t, -4, down.Delta)
		stock, total, _ = stockRow(t, db, tabs, "sale-1")
		assert.Equal(t, [2]int64{8, 11}, [2]int64{stock, total})
		checkLedger(t, db, tabs, "sale-1", 10)

		// A replay answers the stored row and changes nothing.
		again, err := AdjustStock(ctx, db, AdjustParams{Activity: "sale-1", ID: "topup-1", Delta: 5, Operator: "someone else"})
		require.NoError(t, err)
		assert.True(t, again.Replay)
		assert.Equal(t, "ann", again.Operator)
		assert.Equal(t, "more units", again.Reason)
		assert.True(t, at.Equal(again.CreatedAt), again.CreatedAt)
		// The same ID with another delta or activity is a conflict.
		_, err = AdjustStock(ctx, db, AdjustParams{Activity: "sale-1", ID: "topup-1", Delta: 6})
		assert.ErrorIs(t, err, ErrAdjustConflict)
		addActivity(t, db, "sale-2", 3, 1)
		_, err = AdjustStock(ctx, db, AdjustParams{Activity: "sale-2", ID: "topup-1", Delta: 5})
		assert.ErrorIs(t, err, ErrAdjustConflict)
		// IDs compare byte for byte (MySQL: ascii_bin): another case is another adjustment.
		_, err = AdjustStock(ctx, db, AdjustParams{Activity: "sale-1", ID: "TOPUP-1", Delta: 1})
		require.NoError(t, err)
		stock, total, _ = stockRow(t, db, tabs, "sale-1")
		assert.Equal(t, [2]int64{9, 12}, [2]int64{stock, total})

		// Withdrawing more than the unsold stock is refused; nothing written.
		_, err = AdjustStock(ctx, db, AdjustParams{Activity: "sale-1", ID: "withdraw-2", Delta: -10})
		assert.ErrorIs(t, err, ErrInsufficientStock)
		assert.EqualValues(t, 0, rowCount(t, db, tabs.Adjust, "adjust_id = ?", "withdraw-2"))
		stock, total, _ = stockRow(t, db, tabs, "sale-1")
		assert.Equal(t, [2]int64{9, 12}, [2]int64{stock, total})
		// all of it is allowed: stock 0
		_, err = AdjustStock(ctx, db, AdjustParams{Activity: "sale-1", ID: "withdraw-2", Delta: -9})
		require.NoError(t, err)
		stock, total, _ = stockRow(t, db, tabs, "sale-1")
		assert.Equal(t, [2]int64{0, 3}, [2]int64{stock, total})
		checkLedger(t, db, tabs, "sale-1", 10)
		// the consumer's guard sees it: sold out in the DB
		o, err := p.Handle(ctx, msg(4, "sale-1", "u4"))
		require.NoError(t, err)
		assert.Equal(t, order.ReasonSoldOut, o.Reason)

		// An unknown activity; bad params.
		_, err = AdjustStock(ctx, db, AdjustParams{Activity: "nope", ID: "x-1", Delta: 1})
		assert.ErrorIs(t, err, order.ErrActivityNotFound)
		assert.EqualValues(t, 0, rowCount(t, db, tabs.Adjust, "adjust_id = ?", "x-1"))
		for _, bad := range []AdjustParams{
			{Activity: "sale-1", ID: "", Delta: 1},
			{Activity: "sale-1", ID: "has space", Delta: 1},
			{Activity: "sale-1", ID: strings.Repeat("i", maxAdjustIDLen+1), Delta: 1},
			{Activity: "sale-1", ID: "z", Delta: 0},
			{Activity: "sale-1", ID: "z", Delta: 1, Operator: strings.Repeat("o", maxOperatorLen+1)},
			{Activity: "sale-1", ID: "z", Delta: 1, Reason: "\xff"},
		} {
			_, err := AdjustStock(ctx, db, bad)
			assert.ErrorIs(t, err, ErrInvalidAdjust, "%+v", bad)
		}
		_, err = AdjustStock(ctx, db, AdjustParams{Activity: "bad id", ID: "z", Delta: 1})
		assert.ErrorIs(t, err, order.ErrInvalidID)
		assert.EqualValues(t, 4, rowCount(t, db, tabs.Adjust, ""))

		list, err := Adjustments(ctx, db, "sale-1")
		require.NoError(t, err)
		var ids []string
		for _, a := range list {
			ids = append(ids, a.AdjustID)
		}
		assert.ElementsMatch(t, []string{"topup-1", "withdraw-1", "TOPUP-1", "withdraw-2"}, ids)
	})
}

func TestSetActivityStatus(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		addActivity(t, db, "s", 5, 1)
		_, _, st := stockRow(t, db, defaultTables(), "s")
		assert.EqualValues(t, order.ActivityActive, st)
		require.NoError(t, SetActivityStatus(ctx, db, "s", order.ActivityPaused))
		require.NoError(t, SetActivityStatus(ctx, db, "s", order.ActivityPaused), "again: unchanged is no error")
		_, _, st = stockRow(t, db, defaultTables(), "s")
		assert.EqualValues(t, order.ActivityPaused, st)
		var a order.Activity
		require.NoError(t, db.Where("id = ?", "s").First(&a).Error)
		assert.Equal(t, order.ActivityPaused, a.Status)
		assert.Equal(t, "paused", a.Status.String())
		require.NoError(t, SetActivityStatus(ctx, db, "s", order.ActivityActive))
		_, _, st = stockRow(t, db, defaultTables(), "s")
		assert.EqualValues(t, order.ActivityActive, st)
		assert.ErrorIs(t, SetActivityStatus(ctx, db, "none", order.ActivityPaused), order.ErrActivityNotFound)
		assert.ErrorIs(t, SetActivityStatus(ctx, db, "s", order.ActivityStatus(9)), ErrInvalidAdjust)
		assert.ErrorIs(t, SetActivityStatus(ctx, db, "s", 0), ErrInvalidAdjust)
		assert.ErrorIs(t, SetActivityStatus(ctx, db, "a b", order.ActivityPaused), order.ErrInvalidID)
	})
}

// Two adjustments (a top-up and a withdrawal, each sent twice at once)
// race with the consumer deducting: each applies once, and stock + live
// orders = total_stock = initial + top-up − withdrawal, counted with SQL.
func TestAdjustStockRacesConsumer(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		tabs := defaultTables()
		const initial, buyers = 100, 60
		addActivity(t, db, "1", initial, 1)
		p := newProc(t, db)
		c, err := order.NewConsumer(p, newLedger(), order.WithBatchSize(10))
		require.NoError(t, err)
		var kms []order.Record
		for i := 0; i < buyers; i++ {
			kms = append(kms, kmsg(t, int64(i), msg(i, "1", num(1000+i))))
		}
		var wg sync.WaitGroup
		replays := make([]bool, 4)
		errs := make([]error, 4)
		var claimErr error
		wg.Go(func() { claimErr = runClaim(t, c, &fakeSession{ctx: ctx}, kms) })
		for k := 0; k < 4; k++ {
			wg.Go(func() {
				params := AdjustParams{Activity: "1", ID: "top-up", Delta: 20}
				if k%2 == 1 {
					params = AdjustParams{Activity: "1", ID: "withdraw", Delta: -15}
				}
				a, err := AdjustStock(ctx, db, params)
				if err != nil {
					errs[k] = fmt.Errorf("%s: %w", params.ID, err)
					return
				}
				replays[k] = a.Replay
			})
		}
		wg.Wait()
		require.NoError(t, claimErr)
		for _, err := range errs {
			require.NoError(t, err)
		}
		assert.ElementsMatch(t, []bool{false, false, true, true}, replays, "each ID applied once")
		assert.EqualValues(t, buyers, liveUnitsSQL(t, db, tabs, "1"))
		stock, total, _ := stockRow(t, db, tabs, "1")
		assert.EqualValues(t, initial+20-15, total)
		assert.EqualValues(t, initial+20-15-buyers, stock)
		assert.EqualValues(t, 2, rowCount(t, db, tabs.Adjust, ""))
		checkLedger(t, db, tabs, "1", initial)
	})
}

// Under other table names the ledger lives in the named table.
func TestAdjustStockWithTables(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		opt := order.WithTables(otherTables)
		require.NoError(t, order.AutoMigrate(ctx, db, opt))
		addActivityIn(t, db, otherTables, "1", 4, 1)
		addActivity(t, db, "1", 7, 1)
		_, err := AdjustStock(ctx, db, AdjustParams{Activity: "1", ID: "a", Delta: 3}, opt)
		require.NoError(t, err)
		require.NoError(t, SetActivityStatus(ctx, db, "1", order.ActivityClosed, opt))
		stock, total, st := stockRow(t, db, otherTables, "1")
		assert.Equal(t, [3]int64{7, 7, int64(order.ActivityClosed)}, [3]int64{stock, total, st})
		stock, total, st = stockRow(t, db, defaultTables(), "1")
		assert.Equal(t, [3]int64{7, 7, int64(order.ActivityActive)}, [3]int64{stock, total, st}, "the default tables are untouched")
		assert.EqualValues(t, 1, rowCount(t, db, otherTables.Adjust, ""))
		assert.EqualValues(t, 0, rowCount(t, db, defaultTables().Adjust, ""))
		_, err = AdjustStock(ctx, db, AdjustParams{Activity: "1", ID: "a", Delta: 3}, order.WithTables(order.Tables{Order: "x", Adjust: "x"}))
		assert.ErrorIs(t, err, order.ErrInvalidConfig)
	})
}

// A size of a sale in sizes is its own activity row "s/M" (stock.VariantOf):
// it is adjusted, listed and paused like any activity, and only it; an ID
// with more than one '/', or a part that is not an order.ValidID, is refused.
func TestAdjustVariant(t *testing.T) {
	t.Parallel()
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		addActivity(t, db, "s", 0, 2)
		addActivity(t, db, "s/M", 5, 1)
		addActivity(t, db, "s/L", 5, 1)
		_, err := AdjustStock(ctx, db, AdjustParams{Activity: "s/M", ID: "topup-m", Delta: 3, Operator: "op", Reason: "more M"})
		require.NoError(t, err)
		_, err = AdjustStock(ctx, db, AdjustParams{Activity: "s/M", ID: "topup-m", Delta: 3, Operator: "op", Reason: "more M"})
		require.NoError(t, err, "a replay changes nothing")
		stock, total, _ := stockRow(t, db, defaultTables(), "s/M")
		assert.EqualValues(t, 8, stock)
		assert.EqualValues(t, 8, total)
		checkLedger(t, db, defaultTables(), "s/M", 5)
		stock, total, _ = stockRow(t, db, defaultTables(), "s/L")
		assert.EqualValues(t, 5, stock, "the other size is untouched")
		assert.EqualValues(t, 5, total)
		adj, err := Adjustments(ctx, db, "s/M")
		require.NoError(t, err)
		require.Len(t, adj, 1)
		assert.EqualValues(t, 3, adj[0].Delta)
		require.NoError(t, SetActivityStatus(ctx, db, "s/L", order.ActivityPaused))
		_, _, st := stockRow(t, db, defaultTables(), "s/L")
		assert.EqualValues(t, order.ActivityPaused, st)
		_, _, st = stockRow(t, db, defaultTables(), "s/M")
		assert.EqualValues(t, order.ActivityActive, st)
		for _, bad := range []string{"s/M/x", "/M", "s/", "s/M L", strings.Repeat("a", 40) + "/" + strings.Repeat("b", 40)} {
			_, err := AdjustStock(ctx, db, AdjustParams{Activity: bad, ID: "x", Delta: 1})
			assert.ErrorIs(t, err, order.ErrInvalidID, bad)
		}
	})
}
