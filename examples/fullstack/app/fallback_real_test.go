package app_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckillkit/seckill/examples/fullstack/app"
	"github.com/seckillkit/seckill/examples/fullstack/load"
	"github.com/seckillkit/seckill/internal/testenv"
)

// stockRedisProc is a private redis-server (AOF, fsync always) that the test
// stops with kill -9 and starts again on the same port with its data.
type stockRedisProc struct {
	t    *testing.T
	bin  string
	dir  string
	port int
	cmd  *exec.Cmd
}

func startStockRedis(t *testing.T) *stockRedisProc {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server not on PATH: this test stops and restarts a real Redis")
	}
	port, err := testenv.FreePort() // below the ephemeral range: the restart finds it free
	if err != nil {
		t.Fatal(err)
	}
	p := &stockRedisProc{t: t, bin: bin, dir: t.TempDir(), port: port}
	p.start()
	t.Cleanup(p.kill)
	return p
}

func (p *stockRedisProc) addr() string { return "127.0.0.1:" + strconv.Itoa(p.port) }

func (p *stockRedisProc) start() {
	p.t.Helper()
	p.cmd = exec.Command(p.bin, "--port", strconv.Itoa(p.port), "--bind", "127.0.0.1", "--dir", p.dir,
		"--save", "", "--appendonly", "yes", "--appendfsync", "always", "--daemonize", "no",
		"--logfile", filepath.Join(p.dir, "redis.log"))
	if err := p.cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: p.addr(), MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(30 * time.Second)
	for c.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			p.t.Fatalf("redis-server on %s did not answer", p.addr())
		}
		time.Sleep(20 * time.Millisecond) // polling a server start, bounded above
	}
}

func (p *stockRedisProc) kill() {
	if p.cmd != nil && p.cmd.Process != nil {
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		_ = p.cmd.Wait()
		p.cmd = nil
	}
}

// The stock's own redis-server is killed (kill -9) mid-sale and started
// again on the same port with its AOF: the DB pool sells its quota during
// the outage, nobody is told "sold out" meanwhile, and once Redis is back
// the sale sells out exactly, with Redis (read directly), the pool's
// tables and the orders agreeing.
func TestDBFallbackThroughARedisRestart(t *testing.T) {
	const users, stock, quota = 400, 10, 4
	rp := startStockRedis(t)
	cfg := embeddedConfig(users, stock)
	cfg.StockRedisAddr = rp.addr()
	cfg.DBFallbackQuota = quota
	a, url := startApp(t, cfg)
	db := app.DB(a)

	ctx, cancel := context.WithTimeout(context.Background(), loadBound)
	defer cancel()
	rp.kill()
	rep, err := load.Run(ctx, load.Config{Target: url, Users: users / 2, Concurrency: 16, Drain: drainBound,
		OnBuyPhase: func(start bool) {
			if !start {
				rp.start() // back, with its data, when the first crowd is done
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("during the outage:\n%s", rep)
	if rep.Outcomes["sold_out"] != 0 || rep.Accepted != quota {
		t.Fatalf("outage: accepted %d (want the pool's %d), outcomes %v (no sold_out allowed)", rep.Accepted, quota, rep.Outcomes)
	}

	// The same crowd tries again (those told "busy" kept their access
	// token) and buys Redis's share.
	rep, err = load.Run(ctx, load.Config{Target: url, Users: users / 2, Concurrency: 16, Drain: drainBound})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("after the restart:\n%s", rep)
	// A buyer served by the pool during the outage who tries again holds a
	// unit (in the pool): refused as already bought, never given a second
	// unit from Redis. Every accepted buy became an order.
	if int64(rep.Final["created"]) != stock-quota || rep.Accepted != rep.Final["created"] {
		t.Fatalf("after the restart: accepted %d, final %v: want %d, all created", rep.Accepted, rep.Final, stock-quota)
	}

	orders, buyers, dbStock := liveOrders(t, db)
	if orders != stock || buyers != stock || dbStock != 0 {
		t.Fatalf("orders %d, buyers %d, DB stock %d: want %d, %d, 0", orders, buyers, dbStock, stock, stock)
	}
	rem, held := poolCounts(t, db)
	if rem != 0 || held != quota {
		t.Fatalf("pool remaining %d, held %d: want 0, %d", rem, held, quota)
	}
	rdb := redis.NewClient(&redis.Options{Addr: rp.addr()})
	defer rdb.Close()
	tag := fmt.Sprintf("%s{a:%d}:", cfg.KeyPrefix, cfg.ActivityID)
	remaining, err := rdb.HGet(ctx, tag+"meta", "stock").Int64()
	if err != nil {
		t.Fatal(err)
	}
	ledger, err := rdb.HGetAll(ctx, tag+"resv").Result()
	if err != nil {
		t.Fatal(err)
	}
	var heldInRedis int64
	for _, rec := range ledger {
		var u, q int64
		var st byte
		if _, err := fmt.Sscanf(rec, "%d:%d:%c", &u, &q, &st); err == nil && st == 'R' {
			heldInRedis += q
		}
	}
	if remaining != 0 || heldInRedis != stock-quota {
		t.Fatalf("Redis: remaining %d, held %d: want 0, %d", remaining, heldInRedis, stock-quota)
	}
	if _, err := os.Stat(filepath.Join(rp.dir, "appendonlydir")); err != nil {
		t.Logf("AOF directory: %v", err)
	}
}
