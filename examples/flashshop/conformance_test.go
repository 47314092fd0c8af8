package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/seckillkit/seckill/checkout"
	"github.com/seckillkit/seckill/checkout/checkouttest"
	"github.com/seckillkit/seckill/internal/testenv"
)

var saleSeq atomic.Int64

// TestConformance runs the checkout conformance kit against the shop's own
// composition (Open), on miniredis and SQLite — or on real Redis and
// MariaDB when SECKILL_REDIS_ADDR and SECKILL_MYSQL_DSN are set. The shop
// has no broker (its consumer is in-process, and a hand-off that fails is
// released at once), so the two Kafka scenarios skip, saying so.
func TestConformance(t *testing.T) {
	checkouttest.Run(t, func(t testing.TB, c checkouttest.Config) *checkouttest.Sale {
		ctx := context.Background()
		rdb, db := testenv.Redis(t), testenv.DB(t)
		p := Product{ID: fmt.Sprintf("kit%d-%s", saleSeq.Add(1), testenv.Prefix(t)[:8]), Name: "kit", PriceCents: 100, FlashStock: c.Stock, Limit: c.PerUserLimit}
		if c, ok := rdb.(*redis.Client); ok { // the shop's keys are under its own prefix, named by the product
			t.Cleanup(func() { deleteKeys(c, "*{a:"+p.ID+"}*") })
		}
		shop, err := Open(ctx, rdb, db, p, []byte("test-secret"), 0, c.Steps)
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		return &checkouttest.Sale{
			Checkout: shop.Sale,
			Attempt: func(_ context.Context, user string) (checkout.Attempt, error) {
				return checkout.Attempt{User: user}, nil // the shop's sale asks for no token, captcha or link
			},
			Drain: func(ctx context.Context) error {
				// The consumer is in-process: nothing is in flight once a
				// buy returned; the reconciler (grace 0) releases what a
				// failed step left held.
				for range 3 {
					if _, err := shop.Recon.Reconcile(ctx, p.ID); err != nil {
						return err
					}
				}
				return nil
			},
			Counts: func(ctx context.Context) (checkouttest.Counts, error) {
				return checkouttest.Count(ctx, shop.Stock, db, p.ID, c.Stock)
			},
			Faults: checkouttest.Faults{
				Freeze: func(ctx context.Context, frozen bool) error {
					if frozen {
						return shop.Stock.Freeze(ctx, p.ID)
					}
					return shop.Stock.Unfreeze(ctx, p.ID)
				},
				Pause: func(ctx context.Context, paused bool) error {
					if paused {
						return shop.Stock.Pause(ctx, p.ID)
					}
					return shop.Stock.Resume(ctx, p.ID)
				},
			},
		}
	})
}
