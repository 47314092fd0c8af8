package app_test

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"os"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"gorm.io/gorm"

	"github.com/seckillkit/seckill/examples/fullstack/app"
	"github.com/seckillkit/seckill/examples/fullstack/load"
	"github.com/seckillkit/seckill/stock"
)

// sizePoolCounts reads a size's DB fallback pool straight from its tables:
// its quota and remaining units, and the units held in it.
func sizePoolCounts(t *testing.T, db *gorm.DB, size string) (quota, remaining, held int64) {
	t.Helper()
	if err := db.Raw("SELECT quota, remaining FROM seckill_fallback_pool WHERE activity_id = ?", size).Row().Scan(&quota, &remaining); err != nil {
		t.Fatalf("pool of %s: %v", size, err)
	}
	if err := db.Raw("SELECT COALESCE(SUM(qty), 0) FROM seckill_fallback_reservation WHERE activity_id = ? AND state = 'R'", size).
		Row().Scan(&held); err != nil {
		t.Fatal(err)
	}
	return quota, remaining, held
}

// runPhase is one load.Run of the sale; the caller checks the invariants
// over all phases.
func runPhase(t *testing.T, url string, lc load.Config) *load.Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), loadBound)
	defer cancel()
	lc.Target, lc.Concurrency, lc.Drain = url, 16, drainBound
	rep, err := load.Run(ctx, lc)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", rep)
	return rep
}

// A sale in three sizes with -db-fallback-quota 2: each size has a DB pool
// of 2 and Redis holds the rest of it. A few buyers of size 38 buy from
// Redis; then the stock's Redis answers LOADING (unreachable) and a crowd
// choosing every size is served by each size's pool, exactly its 2 units,
// nobody told "sold out"; Redis comes back and the same crowd buys Redis's
// share of every size. The pool rows (SQL), and the service's per-size
// counts from Redis and SQL, hold the invariants per size: no oversell,
// the caps, remaining + held = units over Redis and the pool, every
// accepted buy one order.
func TestDBFallbackPoolPerSize(t *testing.T) {
	stockRedis := miniredis.RunT(t)
	cfg := embeddedConfig(70, 18)
	cfg.StockRedisAddr = stockRedis.Addr()
	sizedOutage(t, cfg,
		func() { stockRedis.SetError("LOADING Redis is loading the dataset in memory") },
		func() { stockRedis.SetError("") })
}

// TestDBFallbackPoolPerSizeReal is TestDBFallbackPoolPerSize with the
// stock on its own redis-server, killed (kill -9) for the outage and
// started again with its AOF, and the database on MariaDB when
// SECKILL_MYSQL_DSN is set.
func TestDBFallbackPoolPerSizeReal(t *testing.T) {
	rp := startStockRedis(t)
	cfg := embeddedConfig(70, 18)
	cfg.StockRedisAddr = rp.addr()
	if dsn := os.Getenv("SECKILL_MYSQL_DSN"); dsn != "" {
		var b [5]byte
		_, _ = crand.Read(b[:])
		cfg.MySQLDSN, cfg.MySQLDatabase, cfg.DropDatabaseOnClose = dsn, "seckill_fbs_"+hex.EncodeToString(b[:]), true
	}
	sizedOutage(t, cfg, rp.kill, rp.start)
}

// sizedOutage runs the sale of TestDBFallbackPoolPerSize on cfg: down makes
// the stock's Redis unreachable, up brings it back with its data.
func sizedOutage(t *testing.T, cfg app.Config, down, up func()) {
	const quota = 2
	cfg.Variants = []stock.Variant{{ID: "36", Stock: 6}, {ID: "37", Stock: 6}, {ID: "38", Stock: 6}}
	cfg.DBFallbackQuota = quota
	a, url := startApp(t, cfg)
	db := app.DB(a)
	sale := app.ActivityID(a)
	sizes := []string{stock.VariantOf(sale, "36"), stock.VariantOf(sale, "37"), stock.VariantOf(sale, "38")}

	// Redis loads each size with its stock minus its pool.
	vs, err := app.Stock(a).Variants(context.Background(), sale)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		if v.Stock != 6-quota {
			t.Fatalf("size %s: %d units in Redis, want 6 - its pool %d", v.ID, v.Stock, quota)
		}
	}
	for _, s := range sizes {
		if q, rem, held := sizePoolCounts(t, db, s); q != quota || rem != quota || held != 0 {
			t.Fatalf("pool of %s: quota %d, remaining %d, held %d", s, q, rem, held)
		}
	}

	accepted, released := map[string]int{}, map[string]int{}
	tally := func(rep *load.Report) {
		for _, v := range rep.Variants {
			accepted[v.ID] += v.Accepted
		}
		for id, n := range rep.VariantReleased {
			released[id] += n
		}
	}
	// Redis up: three buyers of 38, served by Redis.
	rep := runPhase(t, url, load.Config{Users: 3, Seed: 1, VariantWeights: map[string]float64{"38": 1}})
	tally(rep)
	if rep.Accepted != 3 {
		t.Fatalf("before the outage: accepted %d, want 3", rep.Accepted)
	}
	if _, rem, _ := sizePoolCounts(t, db, sizes[2]); rem != quota {
		t.Fatalf("before the outage the pool of 38 sold: remaining %d", rem)
	}

	// Redis unreachable for the buy phase (back for the count): every size
	// sells its pool, nobody is told sold out.
	down()
	rep = runPhase(t, url, load.Config{Users: 60, FirstUser: 4, Seed: 2, VariantWeights: map[string]float64{"36": 1, "37": 1, "38": 1},
		OnBuyPhase: func(start bool) {
			if !start {
				up()
			}
		}})
	tally(rep)
	if rep.Outcomes["sold_out"] != 0 || rep.Outcomes["busy"] == 0 {
		t.Errorf("during the outage: outcomes %v (busy expected, no sold_out)", rep.Outcomes)
	}
	if rep.Accepted != 3*quota {
		t.Errorf("during the outage: accepted %d, want each size's pool, %d", rep.Accepted, 3*quota)
	}
	for _, s := range sizes {
		if q, rem, held := sizePoolCounts(t, db, s); q != quota || rem != 0 || held != quota {
			t.Errorf("after the outage, pool of %s: quota %d, remaining %d, held %d: want it sold", s, q, rem, held)
		}
	}

	// Redis back: the same crowd buys Redis's share of every size.
	rep = runPhase(t, url, load.Config{Users: 60, FirstUser: 4, Seed: 3, VariantWeights: map[string]float64{"36": 1, "37": 1, "38": 1}})
	tally(rep)

	iv := countsOf(t, a)
	if !iv.Settled {
		t.Fatalf("not settled: %+v", iv)
	}
	for _, v := range load.CheckVariants(iv, accepted, released) {
		t.Errorf("invariant violated: %s", v)
	}
	if units := iv.Initial + iv.Adjusted; iv.RedisRemain+iv.RedisLive+iv.PoolRemain+iv.PoolLive != units || iv.LiveOrders != iv.RedisLive+iv.PoolLive {
		t.Errorf("over the sale: redis %d + %d live, pool %d + %d live, %d live orders, %d units",
			iv.RedisRemain, iv.RedisLive, iv.PoolRemain, iv.PoolLive, iv.LiveOrders, units)
	}
	var sold int64
	for _, v := range iv.Variants {
		if v.PoolHeld != quota || v.PoolRemain != 0 || v.PoolLive != quota {
			t.Errorf("size %s: pool held %d (%d reservations), remaining %d: want %d sold", v.ID, v.PoolHeld, v.PoolLive, v.PoolRemain, quota)
		}
		if v.LiveOrders != 6 || v.RedisRemain != 0 {
			t.Errorf("size %s: %d sold, %d left in Redis: want all 6 sold", v.ID, v.LiveOrders, v.RedisRemain)
		}
		sold += v.LiveOrders
	}
	if iv.MaxPerUser > 1 || iv.RedisMaxPerUser > 1 || iv.PoolMaxPerUser > 1 || iv.DistinctUsers != sold {
		t.Errorf("one unit per buyer over the sale: most %d (DB) %d (Redis) %d (pool), %d buyers for %d units",
			iv.MaxPerUser, iv.RedisMaxPerUser, iv.PoolMaxPerUser, iv.DistinctUsers, sold)
	}
}

// plantPoolUnit writes a held reservation of one unit of variant v for
// user into its DB fallback pool, taking the unit from the pool's
// remaining (the pool itself stays conserved). It is released before the
// service stops, whose drain would wait for it (a reservation in flight).
func plantPoolUnit(t *testing.T, a *app.App, v, user, resv string) {
	t.Helper()
	db, size := app.DB(a), stock.VariantOf(app.ActivityID(a), v)
	t.Cleanup(func() {
		if _, err := app.Fallback(a).Release(context.Background(), size, resv); err != nil {
			t.Errorf("release the planted %s: %v", resv, err)
		}
	})
	if err := db.Exec("INSERT INTO seckill_fallback_reservation (request_id, activity_id, user_id, qty, state, created_ms, released_ms)"+
		" VALUES (?, ?, ?, 1, 'R', 1, 0)", resv, size, user).Error; err != nil {
		t.Fatal(err)
	}
	if err := db.Exec("UPDATE seckill_fallback_pool SET remaining = remaining - 1 WHERE activity_id = ?", size).Error; err != nil {
		t.Fatal(err)
	}
}

// The per-size checks of the DB pools catch a violation planted in the
// pool tables of a sale in sizes: a unit gone from a size's pool, a size's
// cap and the sale's cap exceeded in the pools.
func TestVariantPoolInvariantsCatchPlanted(t *testing.T) {
	for _, c := range []struct {
		name  string
		plant func(t *testing.T, a *app.App)
		want  string
	}{
		{"a unit gone from a pool", func(t *testing.T, a *app.App) {
			if err := app.DB(a).Exec("UPDATE seckill_fallback_pool SET remaining = remaining - 1 WHERE activity_id = ?",
				stock.VariantOf(app.ActivityID(a), "38")).Error; err != nil {
				t.Fatal(err)
			}
		}, "I5 variant 38: redis total 2 + DB pool 1 != initial 4 + adjustments 0"},
		{"size cap in a pool", func(t *testing.T, a *app.App) {
			plantPoolUnit(t, a, "36", "u1", "p1")
			plantPoolUnit(t, a, "36", "u1", "p2")
		}, "I2 variant 36: a buyer holds 2 units in the DB pool (cap 1)"},
		{"sale cap in the pools", func(t *testing.T, a *app.App) {
			plantPoolUnit(t, a, "36", "u1", "p1")
			plantPoolUnit(t, a, "37", "u1", "p2")
			plantPoolUnit(t, a, "38", "u1", "p3")
		}, "I2 a buyer holds 3 units over all variants in the DB pools (the sale's cap 2)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := variantConfig(10)
			cfg.DBFallbackQuota = 2
			a, _ := startApp(t, cfg)
			if v := load.CheckVariants(countsOf(t, a), nil, nil); len(v) > 0 {
				t.Fatalf("before the plant: %q", v)
			}
			c.plant(t, a)
			v := load.CheckVariants(countsOf(t, a), nil, nil)
			if !contains(v, c.want) {
				t.Errorf("planted %s: the checker says %q, want %q among them", c.name, v, c.want)
			}
		})
	}
}

// Without an outage each size's DB pool is sold once Redis's share of that
// size is gone: every size sells out exactly, its pool included, and the
// run's own check (per size and over the sale) finds nothing.
func TestDBFallbackPoolPerSizeSellsAfterRedisShare(t *testing.T) {
	const users = 120
	cfg := embeddedConfig(users, 9)
	cfg.Variants = []stock.Variant{{ID: "36", Stock: 3}, {ID: "37", Stock: 4}, {ID: "38", Stock: 2}}
	cfg.DBFallbackQuota = 2 // pools 2, 2, 2
	a, url := startApp(t, cfg)
	rep := runPhase(t, url, load.Config{Users: users, Seed: 4, VariantWeights: map[string]float64{"36": 1, "37": 1, "38": 1}})
	for _, v := range rep.Violations {
		t.Errorf("invariant violated: %s", v)
	}
	if rep.Accepted != 9 || rep.Final["created"] != 9 {
		t.Errorf("accepted %d, created %d: want every unit of every size", rep.Accepted, rep.Final["created"])
	}
	for _, v := range cfg.Variants {
		size := stock.VariantOf(app.ActivityID(a), v.ID)
		if q, rem, held := sizePoolCounts(t, app.DB(a), size); q != 2 || rem != 0 || held != 2 {
			t.Errorf("pool of %s: quota %d, remaining %d, held %d: want its 2 sold", size, q, rem, held)
		}
	}
	for _, v := range rep.Server.Variants {
		if v.RedisRemain != 0 || v.PoolRemain != 0 || v.RedisHeld+v.PoolHeld != v.Initial {
			t.Errorf("size %s: redis %d left %d held, pool %d left %d held, of %d", v.ID, v.RedisRemain, v.RedisHeld, v.PoolRemain, v.PoolHeld, v.Initial)
		}
	}
}
