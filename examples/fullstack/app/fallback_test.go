package app_test

import (
	"context"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"gorm.io/gorm"

	"github.com/seckillkit/seckill/examples/fullstack/app"
	"github.com/seckillkit/seckill/examples/fullstack/load"
)

// poolCounts reads the DB fallback pool straight from its tables.
func poolCounts(t *testing.T, db *gorm.DB) (remaining, held int64) {
	t.Helper()
	if err := db.Raw("SELECT remaining FROM seckill_fallback_pool").Scan(&remaining).Error; err != nil {
		t.Fatal(err)
	}
	if err := db.Raw("SELECT COUNT(*) FROM seckill_fallback_reservation WHERE state = 'R'").Scan(&held).Error; err != nil {
		t.Fatal(err)
	}
	return remaining, held
}

func liveOrders(t *testing.T, db *gorm.DB) (orders, buyers, dbStock int64) {
	t.Helper()
	if err := db.Raw("SELECT COUNT(*), COUNT(DISTINCT user_id) FROM seckill_order WHERE status <> 'CANCELLED'").Row().Scan(&orders, &buyers); err != nil {
		t.Fatal(err)
	}
	if err := db.Raw("SELECT stock FROM seckill_activity").Scan(&dbStock).Error; err != nil {
		t.Fatal(err)
	}
	return orders, buyers, dbStock
}

// Without an outage the DB pool's units are not stranded: they are sold
// once Redis's share is gone, and the sale sells out exactly.
func TestDBFallbackPoolSellsAfterRedisShare(t *testing.T) {
	const users, stock, quota = 300, 10, 4
	cfg := embeddedConfig(users, stock)
	cfg.DBFallbackQuota = quota
	a, url := startApp(t, cfg)
	rep := runLoad(t, url, users, 32)
	assertSale(t, rep, users, stock)
	db := app.DB(a)
	if rem, held := poolCounts(t, db); rem != 0 || held != quota {
		t.Fatalf("pool remaining %d, held %d: want 0, %d", rem, held, quota)
	}
	if orders, buyers, dbStock := liveOrders(t, db); orders != stock || buyers != stock || dbStock != 0 {
		t.Fatalf("orders %d, buyers %d, DB stock %d", orders, buyers, dbStock)
	}
}

// The stock's Redis (its own server, as a deployment that keeps the hot
// keys apart would have) answers LOADING for the whole buy phase: the DB
// pool sells exactly its quota, every other buyer is told "busy" (never
// "sold out": Redis's share is still there) and gets the access token back,
// and the two stores together hold exactly the stock. Counted from the
// pool's tables and the orders in SQL, and by the load generator's checker.
func TestDBFallbackDuringARedisOutage(t *testing.T) {
	const users, stock, quota = 300, 10, 4
	stockRedis := miniredis.RunT(t)
	cfg := embeddedConfig(users, stock)
	cfg.StockRedisAddr = stockRedis.Addr()
	cfg.DBFallbackQuota = quota
	a, url := startApp(t, cfg)
	db := app.DB(a)

	ctx, cancel := context.WithTimeout(context.Background(), loadBound)
	defer cancel()
	stockRedis.SetError("LOADING Redis is loading the dataset in memory")
	rep, err := load.Run(ctx, load.Config{Target: url, Users: users, Concurrency: 32, Drain: drainBound,
		OnBuyPhase: func(start bool) {
			if !start {
				stockRedis.SetError("") // the outage ends with the buy phase
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", rep)
	if rep.Outcomes["sold_out"] != 0 {
		t.Errorf("%d buyers told sold out while Redis's share was unreachable", rep.Outcomes["sold_out"])
	}
	if rep.Accepted != quota || rep.Final["created"] != quota {
		t.Errorf("accepted %d, created %d: want the pool's %d", rep.Accepted, rep.Final["created"], quota)
	}
	if rep.Outcomes["busy"] == 0 {
		t.Errorf("no buyer was told busy: %v", rep.Outcomes)
	}
	if rem, held := poolCounts(t, db); rem != 0 || held != quota {
		t.Fatalf("pool remaining %d, held %d: want 0, %d", rem, held, quota)
	}
	if orders, buyers, dbStock := liveOrders(t, db); orders != quota || buyers != quota || dbStock != stock-quota {
		t.Fatalf("orders %d, buyers %d, DB stock %d: want %d, %d, %d", orders, buyers, dbStock, quota, quota, stock-quota)
	}
	s := rep.Server // Redis + pool conservation, as the service counts it after the outage
	if s.RedisRemain != stock-quota || s.RedisLive != 0 || s.PoolRemain != 0 || s.PoolLive != quota {
		t.Fatalf("server counts: %+v", s)
	}
}
