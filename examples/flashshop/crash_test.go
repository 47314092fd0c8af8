package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	mysqldrv "github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/stock"
)

// TestKillShopMidSale: the shop on real Redis and MariaDB is killed with
// SIGKILL while a crowd is buying, and started again on the same stores.
// Every buyer then retries its attempt (same request_id) until it has a
// final answer. After the reconciler's grace, counted from Redis and SQL:
// no oversell, one unit per buyer, every held reservation is exactly one
// live order and every live order a held reservation (nothing accepted
// lost, nothing sold twice), Redis remaining + held = DB stock + live
// orders = the stock put on sale, and every buyer told "created" (or
// queued, then created) owns an order.
func TestKillShopMidSale(t *testing.T) {
	if testing.Short() {
		t.Skip("crash tier: a real process killed mid-sale, not run with -short")
	}
	addr, dsn := os.Getenv("SECKILL_REDIS_ADDR"), os.Getenv("SECKILL_MYSQL_DSN")
	if addr == "" || dsn == "" {
		t.Skip("SECKILL_REDIS_ADDR and SECKILL_MYSQL_DSN not both set: the crash test runs the shop on real Redis and MariaDB")
	}
	const buyers, units = 60, 20
	ctx := context.Background()
	db := testenv.MySQL(t)
	cfg, err := mysqldrv.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.DBName, cfg.ParseTime = db.Migrator().CurrentDatabase(), true
	var tag [4]byte
	_, _ = rand.Read(tag[:])
	product := "crash-" + hex.EncodeToString(tag[:]) // its keys and rows are this test's alone
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { deleteKeys(rdb, "*{a:"+product+"}*"); _ = rdb.Close() })

	bin := filepath.Join(t.TempDir(), "flashshop")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	port := freePort(t)
	base := "http://" + port
	start := func() *exec.Cmd {
		cmd := exec.Command(bin, "-addr", port, "-redis", addr, "-mysql", cfg.FormatDSN(), "-product", product,
			"-stock", fmt.Sprint(units), "-grace", "2s")
		cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() })
		waitReady(t, base)
		return cmd
	}
	shop := start()

	clients := make([]*http.Client, buyers)
	for i := range clients {
		jar, _ := cookiejar.New(nil)
		clients[i] = &http.Client{Jar: jar, Timeout: 10 * time.Second}
		resp, err := clients[i].PostForm(base+"/login", url.Values{"name": {fmt.Sprintf("buyer%d", i)}})
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("login buyer%d: %v %v", i, err, resp)
		}
		resp.Body.Close()
	}
	buy := func(i int) (int, map[string]string, error) {
		resp, err := clients[i].Post(base+"/flash/buy", "application/json", strings.NewReader(`{"request_id":"attempt1"}`))
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		var body map[string]string
		err = json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, body, err
	}

	// The crowd buys; the shop is killed when a third of them have an answer.
	var mu sync.Mutex
	answered := 0
	killed := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < buyers; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if _, _, err := buy(i); err == nil {
				mu.Lock()
				answered++
				if answered == buyers/3 {
					close(killed)
				}
				mu.Unlock()
			}
		}(i)
	}
	<-killed
	if err := shop.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_, _ = shop.Process.Wait()
	wg.Wait()
	t.Logf("killed after %d answers", answered)
	start()

	// Every buyer retries its attempt until it has a final answer.
	final := map[int]string{}
	for i := 0; i < buyers; i++ {
		for try := 0; ; try++ {
			code, body, err := buy(i)
			if err == nil && code != http.StatusServiceUnavailable {
				final[i] = body["status"]
				break
			}
			if try == 50 {
				t.Fatalf("buyer%d: no final answer after 50 tries: %d %v %v", i, code, body, err)
			}
		}
	}

	// The reconciler (every 0.5 s, grace 2 s) settles what the kill left
	// held without an order: wait until every held reservation is an order.
	var held map[string]string
	var live map[string]string
	for try := 0; ; try++ {
		held, live = ledger(t, rdb, product), liveOrders(t, db, product)
		if len(held) == len(live) || try == 120 {
			break
		}
		time.Sleep(500 * time.Millisecond) // the reconciler's own schedule, in another process
	}
	st, err := (func() (stock.Stats, error) {
		d, err := stock.New(rdb)
		if err != nil {
			return stock.Stats{}, err
		}
		return d.Stats(ctx, product)
	})()
	if err != nil {
		t.Fatal(err)
	}
	var dbStock int64
	if err := db.Model(&order.Activity{}).Where("id = ?", product).Pluck("stock", &dbStock).Error; err != nil {
		t.Fatal(err)
	}
	t.Logf("answers: %v; held %d, live orders %d, redis remaining %d, db stock %d", tally(final), len(held), len(live), st.Remaining, dbStock)
	if len(live) > units {
		t.Errorf("oversell: %d live orders of %d units", len(live), units)
	}
	for resv, user := range held {
		if live[resv] != user {
			t.Errorf("held reservation %s (%s) has no live order (lost or never settled)", resv, user)
		}
	}
	users := map[string]int{}
	for resv, user := range live {
		users[user]++
		if held[resv] != user {
			t.Errorf("live order of %s (%s) holds no reservation in Redis", resv, user)
		}
	}
	for u, n := range users {
		if n > 1 {
			t.Errorf("%s has %d orders, cap 1", u, n)
		}
	}
	if st.Remaining+int64(len(held)) != units || dbStock+int64(len(live)) != units {
		t.Errorf("not conserved: redis %d + held %d, db %d + live %d, want %d", st.Remaining, len(held), dbStock, len(live), units)
	}
	for i, s := range final {
		if (s == "created" || s == "queued") && users[fmt.Sprintf("buyer%d", i)] != 1 {
			t.Errorf("buyer%d was told %q and owns no order", i, s)
		}
	}
}

func tally(m map[int]string) map[string]int {
	out := map[string]int{}
	for _, s := range m {
		out[s]++
	}
	return out
}

// ledger is the held reservations of product in Redis, by ID.
func ledger(t *testing.T, rdb *redis.Client, product string) map[string]string {
	d, err := stock.New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	var cur uint64
	for {
		page, next, err := d.Reservations(context.Background(), product, cur, 500)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page {
			if r.State == stock.Held {
				out[r.ID] = r.User
			}
		}
		if cur = next; cur == 0 {
			return out
		}
	}
}

// liveOrders is product's live (CREATED or PAID) orders, user by reservation.
func liveOrders(t *testing.T, db *gorm.DB, product string) map[string]string {
	var rows []order.Order
	if err := db.Where("activity_id = ? AND status IN ?", product, []string{order.OrderCreated, order.OrderPaid}).Find(&rows).Error; err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, o := range rows {
		if _, dup := out[o.ReservationID]; dup {
			t.Errorf("two live orders of reservation %s", o.ReservationID)
		}
		out[o.ReservationID] = o.UserID
	}
	return out
}

// deleteKeys deletes this test's keys (SCAN, then DEL; never FLUSHDB).
func deleteKeys(rdb *redis.Client, match string) {
	ctx := context.Background()
	iter := rdb.Scan(ctx, 0, match, 1000).Iterator()
	for iter.Next(ctx) {
		_ = rdb.Del(ctx, iter.Val()).Err()
	}
}

// freePort is a loopback address free a moment ago, below the kernel's
// ephemeral range: the shop's restart finds it free again.
func freePort(t *testing.T) string {
	p, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return "127.0.0.1:" + strconv.Itoa(p)
}

// waitReady polls the shop until it answers (bounded: 300 tries).
func waitReady(t *testing.T, base string) {
	for try := 0; try < 300; try++ {
		if resp, err := http.Get(base + "/products"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		time.Sleep(100 * time.Millisecond) // another process starting: nothing to wait on but its port
	}
	t.Fatalf("the shop at %s did not start", base)
}
