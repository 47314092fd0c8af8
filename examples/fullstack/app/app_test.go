package app_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckillkit/seckill/examples/fullstack/app"
	"github.com/seckillkit/seckill/examples/fullstack/load"
)

// The tests' time limits are bounds, not expectations: generous enough for
// -race on two loaded cores, and every wait ends as soon as its condition
// holds.
const (
	startBound = 2 * time.Minute // app.New: infrastructure, migrations, seeding
	stopBound  = 2 * time.Minute // Shutdown with its drain
	loadBound  = 5 * time.Minute // one load.Run
	drainBound = 2 * time.Minute // the pipeline settling after the buy phase
)

// startApp starts the service in-process on a free port and stops it (with
// its drain) at cleanup.
func startApp(t testing.TB, cfg app.Config) (*app.App, string) {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = app.NewLogger(os.Stderr, "warn")
	}
	ctx, cancel := context.WithTimeout(context.Background(), startBound)
	defer cancel()
	a, err := app.New(ctx, cfg, log)
	if err != nil {
		t.Fatalf("app.New: %v", err)
	}
	url, err := a.Start()
	if err != nil {
		_ = a.Shutdown(context.Background())
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), stopBound)
		defer cancel()
		if err := a.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return a, url
}

func embeddedConfig(users int, stock int64) app.Config {
	cfg := app.DefaultConfig() // embedded: no server addresses
	cfg.Addr = "127.0.0.1:0"
	cfg.StartIn = 0
	cfg.DemoUsers = users
	cfg.Stock = stock
	cfg.Demo = true
	// The load tests that move this config onto real servers read the
	// captcha answers through the demo hook too.
	cfg.DemoWithRealServers = true
	return cfg
}

func runLoad(t *testing.T, url string, users, conc int) *load.Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), loadBound)
	defer cancel()
	// The progress bars redraw one line: on a terminal only. In a log (CI
	// runs -v) a test's "--- FAIL" line would end up glued to a bar.
	var progress io.Writer
	if fi, err := os.Stderr.Stat(); testing.Verbose() && err == nil && fi.Mode()&os.ModeCharDevice != 0 {
		progress = os.Stderr
	}
	rep, err := load.Run(ctx, load.Config{Target: url, Users: users, Concurrency: conc, Drain: drainBound, Progress: progress})
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	t.Logf("\n%s", rep)
	return rep
}

func assertSale(t *testing.T, rep *load.Report, users int, stock int64) {
	t.Helper()
	for _, v := range rep.Violations {
		t.Errorf("invariant violated: %s", v)
	}
	if rep.BuyRequests != users {
		t.Errorf("buy requests %d, want %d", rep.BuyRequests, users)
	}
	if got := rep.Final["created"]; int64(got) != stock {
		t.Errorf("orders created %d, want %d (final %v)", got, stock, rep.Final)
	}
	if rep.Server.Sold() != stock || rep.Server.DBStock != 0 || rep.Server.RedisRemain != 0 {
		t.Errorf("server counts: %+v", rep.Server)
	}
	if rep.Outcomes["queued"] != rep.Accepted || rep.Accepted < int(stock) {
		t.Errorf("accepted %d for stock %d: %v", rep.Accepted, stock, rep.Outcomes)
	}
}

// TestLoadEmbedded is the unit-tier run: miniredis + kfake + SQLite, the
// load generator's full HTTP flow, invariants counted afterwards.
func TestLoadEmbedded(t *testing.T) {
	t.Parallel() // waits more than it computes: overlaps the other waiting tests
	const users, stock = 1000, 20
	_, url := startApp(t, embeddedConfig(users, stock))
	rep := runLoad(t, url, users, 64)
	assertSale(t, rep, users, stock)
}

// TestLoadEmbeddedShards: the sale split over 4 Redis keys (-shards 4)
// sells exactly its stock — counted from Redis (every shard) and SQL — with
// no oversell and no buyer twice, although a buyer's shard runs dry long
// before the others (units are borrowed between shards) and reservations
// are coalesced (the default).
func TestLoadEmbeddedShards(t *testing.T) {
	t.Parallel() // waits more than it computes: overlaps the other waiting tests
	const users, stock = 1000, 40
	cfg := embeddedConfig(users, stock)
	cfg.Shards = 4
	a, url := startApp(t, cfg)
	st, err := app.Stock(a).Stats(context.Background(), app.ActivityID(a))
	if err != nil || len(st.Shards) != 4 || st.Total != stock {
		t.Fatalf("the sale in Redis: %d shards, total %d (%v), want 4 shards of %d units together", len(st.Shards), st.Total, err, stock)
	}
	rep := runLoad(t, url, users, 64)
	assertSale(t, rep, users, stock)
	st, err = app.Stock(a).Stats(context.Background(), app.ActivityID(a))
	if err != nil || st.Remaining != 0 || st.Buyers != stock || st.InTransfer != 0 {
		t.Errorf("the shards after the sale: remaining %d, buyers %d, in transfer %d (%v), want 0, %d and 0", st.Remaining, st.Buyers, st.InTransfer, err, stock)
	}
}

// TestLoadRealServers is the integration tier: real Redis and MariaDB (and
// kfake), 10,000 users for 100 units.
func TestLoadRealServers(t *testing.T) {
	t.Parallel() // the hammer (CPU) overlaps the waiting tests of the parallel phase
	addr, dsn := os.Getenv("SECKILL_REDIS_ADDR"), os.Getenv("SECKILL_MYSQL_DSN")
	if addr == "" || dsn == "" {
		t.Skip("SECKILL_REDIS_ADDR and SECKILL_MYSQL_DSN not both set: no real servers")
	}
	const users, stock = 10000, 100
	var b [5]byte
	_, _ = rand.Read(b[:])
	tag := hex.EncodeToString(b[:])
	cfg := embeddedConfig(users, stock)
	cfg.RedisAddr = addr
	cfg.KeyPrefix = "tfs" + tag + ":"
	cfg.MySQLDSN = dsn
	cfg.MySQLDatabase = "seckill_fs_" + tag
	cfg.DropDatabaseOnClose = true
	t.Cleanup(func() { cleanPrefix(addr, cfg.KeyPrefix) })
	_, url := startApp(t, cfg)
	rep := runLoad(t, url, users, 128)
	assertSale(t, rep, users, stock)
}

// TestLoadRealCluster runs the sale on the real Redis Cluster: every key the
// chain touches (stock, tokens, captcha, risk, limiter, results, delay
// queue) must be Cluster-safe, or a script fails with CROSSSLOT. The DB is
// MariaDB when SECKILL_MYSQL_DSN is set, embedded SQLite otherwise.
func TestLoadRealCluster(t *testing.T) {
	t.Parallel() // the hammer (CPU) overlaps the waiting tests of the parallel phase
	addrs := os.Getenv("SECKILL_REDIS_CLUSTER_ADDRS")
	if addrs == "" {
		t.Skip("SECKILL_REDIS_CLUSTER_ADDRS not set: no real Redis Cluster")
	}
	const users, stock = 2000, 20
	var b [5]byte
	_, _ = rand.Read(b[:])
	tag := hex.EncodeToString(b[:])
	cfg := embeddedConfig(users, stock)
	cfg.RedisCluster = strings.Split(addrs, ",")
	cfg.KeyPrefix = "tfc" + tag + ":"
	if dsn := os.Getenv("SECKILL_MYSQL_DSN"); dsn != "" {
		cfg.MySQLDSN = dsn
		cfg.MySQLDatabase = "seckill_fc_" + tag
		cfg.DropDatabaseOnClose = true
	}
	t.Cleanup(func() { cleanClusterPrefix(cfg.RedisCluster, cfg.KeyPrefix) })
	a, url := startApp(t, cfg)
	if got := a.Infra().RedisKind; !strings.Contains(strings.ToLower(got), "cluster") {
		t.Fatalf("redis kind %q, want the cluster", got)
	}
	rep := runLoad(t, url, users, 64)
	assertSale(t, rep, users, stock)
}

func cleanClusterPrefix(addrs []string, prefix string) {
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), stopBound)
	defer cancel()
	_ = c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		it := m.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for it.Next(ctx) {
			m.Del(ctx, it.Val())
		}
		return it.Err()
	})
}

func cleanPrefix(addr, prefix string) {
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), stopBound)
	defer cancel()
	it := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	for it.Next(ctx) {
		c.Del(ctx, it.Val())
	}
}
