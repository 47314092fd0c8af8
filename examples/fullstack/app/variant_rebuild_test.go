package app_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/seckillkit/seckill/admin"
	"github.com/seckillkit/seckill/examples/fullstack/app"
	"github.com/seckillkit/seckill/examples/fullstack/load"
	"github.com/seckillkit/seckill/stock"
)

// TestVariantSaleRebuiltAfterRedisLost: Redis loses the whole sale in
// sizes mid-sale (a restart without its data; on a real server every key
// of the sale's prefix deleted), after one size was topped up. The
// deployment's own path runs: the data-loss fence freezes each size, the
// preloader's recovery waits for the pipeline, then rebuilds every size
// from the database (its live orders and the adjusted total), one size at
// a time. Counted from Redis and SQL after a second crowd bought what was
// left: every size was rebuilt (a new epoch), no size sold more than its
// stock plus its top-up, every cap held, every accepted buy is one order,
// and each size's stock is conserved — a rebuild that reloaded a size's
// full stock, forgot the top-up, or counted another size's orders fails
// the run's checks. On a real Redis and MariaDB when SECKILL_REDIS_ADDR and
// SECKILL_MYSQL_DSN are set, embedded otherwise.
func TestVariantSaleRebuiltAfterRedisLost(t *testing.T) {
	const crowd, extra, topUp = 320, 60, 6
	cfg := embeddedConfig(crowd+extra, 36)
	cfg.Variants = []stock.Variant{{ID: "36", Stock: 8}, {ID: "37", Stock: 12, PerUserLimit: 1}, {ID: "38", Stock: 16}}
	cfg.PerUserLimit = 2
	addr, dsn := os.Getenv("SECKILL_REDIS_ADDR"), os.Getenv("SECKILL_MYSQL_DSN")
	onServers := addr != "" && dsn != ""
	if onServers {
		tag := randHex(5)
		cfg.RedisAddr, cfg.KeyPrefix = addr, "tvr"+tag+":"
		cfg.MySQLDSN, cfg.MySQLDatabase, cfg.DropDatabaseOnClose = dsn, "seckill_vr_"+tag, true
		t.Cleanup(func() { cleanPrefix(addr, cfg.KeyPrefix) })
	}
	// The rebuild waits on the preloader's poll: short, so the test does
	// not wait 5 s per look (a bound, not a synchronisation: the checks
	// below wait on the state itself).
	app.SetPreloadEvery(&cfg, 200*time.Millisecond)
	a, url := startApp(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 2*loadBound)
	defer cancel()
	sale := app.ActivityID(a)
	sizes := []string{"36", "37", "38"}
	epochs := map[string]int64{}
	for _, v := range sizes {
		st, err := app.Stock(a).Stats(ctx, stock.VariantOf(sale, v))
		if err != nil || !st.Loaded {
			t.Fatalf("size %s before the sale: %+v %v", v, st, err)
		}
		epochs[v] = st.Epoch
	}

	wipe := func(ctx context.Context) error {
		if !onServers {
			app.Miniredis(a).FlushAll()
			return nil
		}
		cleanPrefix(addr, cfg.KeyPrefix)
		return nil
	}
	var issued int64 // the access tokens of the sale after the top-up
	rebuilt := func(ctx context.Context) error {
		for {
			all := true
			for _, v := range sizes {
				st, err := app.Stock(a).Stats(ctx, stock.VariantOf(sale, v))
				if err != nil || !st.Loaded || st.Frozen || st.Epoch == epochs[v] {
					all = false
				}
			}
			if all {
				return nil
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("the sizes were not rebuilt: %w", ctx.Err())
			case <-time.After(20 * time.Millisecond): // a poll of the state, bounded by ctx
			}
		}
	}
	// The crowd is held at request 61 until every size is rebuilt (the
	// gate runs the step while the senders wait), then buys what is left.
	steps := []load.Step{
		{At: 30, Name: "top-up size 38 +6", Do: func(ctx context.Context) error {
			_, err := app.AdminBackend(t, a).TopUp(admin.WithAction(ctx, admin.Action{ID: "rebuild-topup-38", Operator: "test"}),
				stock.VariantOf(sale, "38"), topUp)
			if err != nil {
				return err
			}
			ts, err := app.TokenStats(ctx, a)
			issued = ts.Issued
			return err
		}},
		{At: 60, Name: "Redis loses the sale", Do: wipe},
		{At: 61, Name: "every size rebuilt", Do: rebuilt},
	}
	rep, err := load.Run(ctx, load.Config{Target: url, Users: crowd, Concurrency: 16, Drain: drainBound, Seed: 41,
		VariantWeights: map[string]float64{"36": 3, "37": 2, "38": 1}, Steps: steps})
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	t.Logf("\n%s", rep)
	for _, v := range rep.Violations {
		t.Errorf("invariant violated: %s", v)
	}
	for _, v := range sizes {
		if st, err := app.Stock(a).Stats(ctx, stock.VariantOf(sale, v)); err != nil || st.Epoch == epochs[v] {
			t.Errorf("size %s was not rebuilt: %+v %v", v, st, err)
		}
	}
	if len(rep.Server.Variants) != len(sizes) {
		t.Fatalf("%d sizes counted, want %d", len(rep.Server.Variants), len(sizes))
	}
	// The access tokens lived in the lost Redis: they are issued again for
	// the sale's total after the rebuild, its top-up included (before, the
	// initial stock's: a top-up before a loss left buyers refused a token
	// while units remained).
	until(t, time.Minute, "the access-token pool issued again for the topped-up sale", func() bool {
		ts, err := app.TokenStats(ctx, a)
		return err == nil && ts.Issued == issued
	})
	accepted := map[string]int{}
	for _, r := range rep.Variants {
		accepted[r.ID] += r.Accepted
	}

	// The crowd's access tokens were lost with Redis. Fresh buyers sign in
	// and buy what is left of the rebuilt sizes, one size after another,
	// until every size answers sold out.
	next := crowd + 1
	for _, v := range sizes {
		for soldOut := false; !soldOut; next++ {
			if next > crowd+extra {
				t.Fatalf("size %s not sold out after %d fresh buyers", v, extra)
			}
			u := login(t, url, fmt.Sprintf("user%d", next))
			cid, ans, tok, path := u.creds()
			code, m := u.do("POST", path, map[string]string{"token": tok, "captcha_id": cid, "captcha": ans,
				"request_id": "after-rebuild", "variant": v})
			switch st := u.str(m, "status"); {
			case code == 202 && st == "queued":
				accepted[v]++
			case code == 409 && st == "sold_out":
				soldOut = true
			default:
				t.Fatalf("user%d's buy of size %s after the rebuild: %d %v", next, v, code, m)
			}
		}
	}
	// Settled: nothing in flight, every accepted buy an order.
	var iv load.Invariants
	until(t, drainBound, "the buys after the rebuild settled", func() bool {
		iv = countsOf(t, a)
		for _, s := range iv.Variants {
			if s.InFlight != 0 || s.LiveCount != int64(accepted[s.ID]) {
				return false
			}
		}
		return iv.OutboxPending == 0
	})
	for _, v := range load.CheckVariants(iv, accepted, rep.VariantReleased) {
		t.Errorf("after the rebuild: invariant violated: %s", v)
	}
	rep.Server = iv
	want := map[string]int64{"36": 8, "37": 12, "38": 16 + topUp}
	var sold int64
	for _, s := range rep.Server.Variants {
		if s.Total != want[s.ID] || s.RedisTotal != want[s.ID] || s.LiveOrders+s.RedisRemain != want[s.ID] {
			t.Errorf("size %s: total %d (DB) %d (Redis), %d live orders + %d left in Redis; want %d", s.ID, s.Total, s.RedisTotal,
				s.LiveOrders, s.RedisRemain, want[s.ID])
		}
		sold += s.LiveOrders
	}
	// Every unit sold, those left at the loss among them.
	if sold != 8+12+16+topUp {
		t.Errorf("sold %d of %d units: %+v", sold, 8+12+16+topUp, rep.Server.Variants)
	}
}
