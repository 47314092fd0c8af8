package app

import (
	"context"

	"github.com/seckillkit/seckill/stock"
)

// ReserveVariant reserves one unit of variant v of the sale for user
// under resv, straight in the stock ledger (no order follows).
func ReserveVariant(ctx context.Context, a *App, v, user, resv string) (stock.Result, error) {
	return a.p.stock.Reserve(ctx, stock.Request{Activity: stock.VariantOf(a.sale.key, v), User: user, Qty: 1, ReservationID: resv})
}

// AdjustVariantRedis tops variant v up by delta in Redis alone (the DB
// does not hear of it), as a half-applied operator action would leave it.
func AdjustVariantRedis(ctx context.Context, a *App, v, id string, delta int64) error {
	_, err := a.p.stock.Adjust(ctx, stock.AdjustParams{Activity: stock.VariantOf(a.sale.key, v), ID: id, Delta: delta})
	return err
}

// LedgerKey is the Redis hash of variant v's reservations.
func LedgerKey(a *App, v string) string {
	return a.cfg.KeyPrefix + "{a:" + a.sale.key + "}:v:" + v + ":resv"
}

// ReleaseVariant releases resv of variant v in the stock ledger.
func ReleaseVariant(ctx context.Context, a *App, v, resv string) error {
	_, err := a.p.stock.Release(ctx, stock.VariantOf(a.sale.key, v), resv)
	return err
}
