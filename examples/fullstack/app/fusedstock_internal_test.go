package app

import (
	"testing"

	"github.com/seckillkit/seckill/internal/fused"
	"github.com/seckillkit/seckill/stock"
	"github.com/seckillkit/seckill/stock/dbfallback"
)

// TestFusedLookupOnlyWithoutPool: the sale's stock offers checkout the
// deductor's fused replay lookup only without a DB pool and in the
// admission's Redis. With a pool, a lookup that misses in Redis reads the
// pool, which the fused script cannot: it would go on to spend the captcha
// and the access token where the chain answers the reservation the pool
// holds.
func TestFusedLookupOnlyWithoutPool(t *testing.T) {
	type lookupCheck interface {
		LookupCheck(activity, id string) (fused.Check[stock.Reservation], error)
	}
	d := &stock.Deductor{}
	if _, ok := (&saleStock{d: d}).forCheckout(true).(lookupCheck); !ok {
		t.Fatal("no DB pool: the replay lookup is not offered in fused form")
	}
	if _, ok := (&saleStock{d: d, pool: &dbfallback.Store{}}).forCheckout(true).(lookupCheck); ok {
		t.Fatal("DB pool: the replay lookup is offered in fused form")
	}
	if _, ok := (&saleStock{d: d}).forCheckout(false).(lookupCheck); ok {
		t.Fatal("stock in its own Redis: the replay lookup is offered in fused form")
	}
}
