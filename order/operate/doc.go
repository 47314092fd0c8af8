// Package operate holds the operator's writes to a sale's rows in the
// order tables: stock adjustments as an idempotent ledger, the activity's
// status, and the pruning of old dedup rows.
//
//	a, err := operate.AdjustStock(ctx, db, operate.AdjustParams{Activity: "sale-42", ID: "topup-1", Delta: 50, Operator: "ann"})
//	err = operate.SetActivityStatus(ctx, db, "sale-42", order.ActivityPaused)
//	n, err := operate.PruneDedup(ctx, db, time.Now().Add(-7*24*time.Hour), 10_000)
//
// [AdjustStock] inserts the adjustment row (primary key: its ID) and moves
// the activity's stock and total_stock by the same delta in one
// transaction, so stock + live orders = total_stock keeps holding; an ID
// used again with the same values answers the stored row (Replay), with
// other values [ErrAdjustConflict]; a withdrawal never takes stock below
// 0 ([ErrInsufficientStock]). [SetActivityStatus] records a pause or an
// end (order.ActivityStatus); reservations are refused where they are
// taken (the stock package). [PruneDedup] deletes dedup rows older than a
// horizon, which must exceed the oldest message still deliverable (Kafka
// retention, outbox age): the rows are the consumer's idempotence and the
// fence's decision.
//
// Every function takes the order tables' names as an order.TableOption
// (order.WithTables); an invalid one, or a nil db, fails with an error
// wrapping order.ErrInvalidConfig. The functions are safe for concurrent
// use; the redis stock is not touched (the stock package adjusts its own).
package operate
