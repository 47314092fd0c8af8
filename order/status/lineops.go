package status

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/order/internal/dbx"
	"gorm.io/gorm"
)

// The line steps of the cancellations and refunds. An order with lines
// (order.Order.Qty 0) keeps its units in its line rows; every change of a
// line happens under its order's row lock (the CAS of a whole-order
// cancel or refund, or the locking read of [Canceller.CancelLine] and
// [Canceller.RefundLine]), so a line changes state once.

// hasLines reports whether o is an order with lines.
func hasLines(o order.Order) bool { return o.Qty == 0 }

// forUpdate is the locking clause of a read on MySQL/MariaDB and PostgreSQL
// (a locking read reads the latest committed rows, whatever the snapshot);
// SQLite serialises writers.
func forUpdate(db *gorm.DB) string {
	switch db.Dialector.Name() {
	case "mysql", "postgres":
		return " FOR UPDATE"
	}
	return ""
}

// liveLines locks and returns the lines of orderNo that follow their
// order (status ”), in line order.
func liveLines(tx *gorm.DB, table, orderNo string) ([]order.Line, error) {
	var ls []order.Line
	q := "SELECT * FROM " + dbx.QuoteIdent(tx, table) + " WHERE order_no = ? AND status = '' ORDER BY line_no" + forUpdate(tx)
	if err := tx.Raw(q, orderNo).Scan(&ls).Error; err != nil {
		return nil, fmt.Errorf("order: lines of %s: %w", orderNo, err)
	}
	return ls, nil
}

// settleLines moves the live lines ls (locked by liveLines) to status,
// with restock.
func settleLines(tx *gorm.DB, table string, ls []order.Line, status, restock string, now time.Time) error {
	if len(ls) == 0 {
		return nil
	}
	nos := make([]int, len(ls))
	for i := range ls {
		nos[i] = ls[i].LineNo
		ls[i].Status, ls[i].Restock, ls[i].UpdatedAt = status, restock, now
	}
	res := tx.Table(table).Where("order_no = ? AND line_no IN ? AND status = ''", ls[0].OrderNo, nos).
		Updates(map[string]any{"status": status, "restock": restock, "updated_at": now})
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected != int64(len(ls)) {
		return fmt.Errorf("order: lines of %s changed under the order's lock", ls[0].OrderNo)
	}
	return nil
}

// restoreLines gives the units of ls back to their activities' DB stock:
// one update per activity, in ID order (the consumer's order of the stock
// rows, so two transactions never take them in opposite orders).
func restoreLines(tx *gorm.DB, restoreStock string, ls []order.Line) error {
	units := map[string]int64{}
	for _, l := range ls {
		units[l.ActivityID] += l.Qty
	}
	for _, a := range slices.Sorted(maps.Keys(units)) {
		if err := tx.Exec(restoreStock, units[a], a).Error; err != nil {
			return err
		}
	}
	return nil
}

// readLines returns every line of orderNo, in line order.
func readLines(db *gorm.DB, table, orderNo string) ([]order.Line, error) {
	ls := []order.Line{}
	if err := db.Table(table).Where("order_no = ?", orderNo).Order("line_no").Find(&ls).Error; err != nil {
		return nil, fmt.Errorf("order: lines of %s: %w", orderNo, err)
	}
	return ls, nil
}

// releasable reports whether line l's reservation must go back to Redis:
// cancelled, or refunded with its units restocked to the sale.
func releasable(l order.Line) bool {
	return l.Status == order.OrderCancelled || l.Status == order.OrderRefunded && l.Restock == string(RestockSale)
}

// lineOrder is the order a releaser is given for line l of o: the line's
// activity, reservation ("<id>#<i>") and units, o's buyer and times.
func lineOrder(o order.Order, l order.Line) order.Order {
	o.ActivityID, o.ReservationID, o.Qty, o.Price = l.ActivityID, l.ReservationID, l.Qty, l.Price
	o.Status, o.Restock, o.Lines = l.Status, l.Restock, nil
	return o
}
