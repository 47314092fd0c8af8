package operate_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/order/operate"
	"gorm.io/gorm"
)

// openDB opens an embedded SQLite database with the order tables and one
// activity of two units.
func openDB() (*gorm.DB, func()) {
	dir, err := os.MkdirTemp("", "operate-example")
	if err != nil {
		panic(err)
	}
	db, err := testenv.OpenSQLite(filepath.Join(dir, "orders.db"))
	if err != nil {
		panic(err)
	}
	if err := order.AutoMigrate(context.Background(), db); err != nil {
		panic(err)
	}
	start := time.Now()
	db.Create(&order.Activity{ID: "42", Name: "phone", ActivityPrice: 99900, Stock: 2, Remaining: 2,
		PerUserLimit: 1, Start: start, End: start.Add(time.Hour)})
	return db, func() {
		if sqlDB, err := db.DB(); err == nil {
			_ = sqlDB.Close()
		}
		_ = os.RemoveAll(dir)
	}
}

// A top-up and a withdrawal are ledger entries: stock and total_stock move
// together, a replay changes nothing, and no more than the unsold stock
// can be withdrawn.
func ExampleAdjustStock() {
	ctx := context.Background()
	db, done := openDB() // activity "42": 2 units
	defer done()

	up := operate.AdjustParams{Activity: "42", ID: "topup-1", Delta: 3, Operator: "ann", Reason: "second batch"}
	a, err := operate.AdjustStock(ctx, db, up)
	fmt.Println(a.Delta, a.Replay, err)
	a, err = operate.AdjustStock(ctx, db, up) // sent again
	fmt.Println(a.Delta, a.Replay, err)
	_, err = operate.AdjustStock(ctx, db, operate.AdjustParams{Activity: "42", ID: "withdraw-1", Delta: -6, Operator: "bob"})
	fmt.Println(errors.Is(err, operate.ErrInsufficientStock))
	_ = operate.SetActivityStatus(ctx, db, "42", order.ActivityPaused)

	var act order.Activity
	db.Where("id = ?", "42").First(&act)
	fmt.Println(act.Remaining, act.Stock, act.Status)
	// Output:
	// 3 false <nil>
	// 3 true <nil>
	// true
	// 5 5 paused
}
