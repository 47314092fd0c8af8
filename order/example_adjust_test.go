package order_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/seckillkit/seckill/order"
)

// A top-up and a withdrawal are ledger entries: stock and total_stock move
// together, a replay changes nothing, and no more than the unsold stock
// can be withdrawn.
func ExampleAdjustStock() {
	ctx := context.Background()
	db, done := openDB() // activity "42": 2 units
	defer done()

	up := order.AdjustParams{Activity: "42", ID: "topup-1", Delta: 3, Operator: "ann", Reason: "second batch"}
	a, err := order.AdjustStock(ctx, db, up)
	fmt.Println(a.Delta, a.Replay, err)
	a, err = order.AdjustStock(ctx, db, up) // sent again
	fmt.Println(a.Delta, a.Replay, err)
	_, err = order.AdjustStock(ctx, db, order.AdjustParams{Activity: "42", ID: "withdraw-1", Delta: -6, Operator: "bob"})
	fmt.Println(errors.Is(err, order.ErrInsufficientStock))
	_ = order.SetActivityStatus(ctx, db, "42", order.ActivityPaused)

	var act order.Activity
	db.Where("id = ?", "42").First(&act)
	fmt.Println(act.Remaining, act.Stock, act.Status)
	// Output:
	// 3 false <nil>
	// 3 true <nil>
	// true
	// 5 5 paused
}
