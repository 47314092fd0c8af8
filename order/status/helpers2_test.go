package status

import (
	"context"
	"fmt"
	"testing"

	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/order/internal/dbx"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

// dedupRows counts message_dedup rows of a reservation, read straight from SQL.
func dedupRows(t testing.TB, db *gorm.DB, resv string) (n int64, outcome, reason string) {
	t.Helper()
	var rows []order.Dedup
	require.NoError(t, db.Raw("SELECT * FROM message_dedup WHERE reservation_id = ?", resv).Scan(&rows).Error)
	if len(rows) > 0 {
		outcome, reason = rows[0].Outcome, rows[0].Reason
	}
	return int64(len(rows)), outcome, reason
}

func userLive(t testing.TB, db *gorm.DB, act, user string) (orders, units int64) {
	t.Helper()
	require.NoError(t, db.Raw("SELECT COUNT(*) FROM seckill_order WHERE activity_id = ? AND user_id = ? AND status <> ?",
		act, user, order.OrderCancelled).Scan(&orders).Error)
	require.NoError(t, db.Raw("SELECT COALESCE(SUM(qty),0) FROM seckill_order WHERE activity_id = ? AND user_id = ? AND status <> ?",
		act, user, order.OrderCancelled).Scan(&units).Error)
	return orders, units
}

func newProc(t testing.TB, db *gorm.DB, opts ...order.ProcessorOption) *order.Processor {
	t.Helper()
	p, err := order.NewProcessor(db, newGen(t, 1), opts...)
	require.NoError(t, err)
	return p
}

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

// defaultTables is the default table names.
func defaultTables() order.Tables {
	t, err := order.TablesOf()
	if err != nil {
		panic(err)
	}
	return t
}

// otherTables are table names other than the defaults.
var otherTables = order.Tables{Activity: "shop_activity", Order: "order", Dedup: "shop_dedup", Adjust: "shop_adjust", Payment: "shop_payment"}
