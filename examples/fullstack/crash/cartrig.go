package crash

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	mysqldrv "github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/seckillkit/seckill/checkout"
	orderreconcile "github.com/seckillkit/seckill/order/reconcile"
	"github.com/seckillkit/seckill/stock"
)

// CartRig runs cart scenarios: a fresh database on the MariaDB of dsn,
// the sale loaded into a Redis the caller runs, the cart buyer built,
// journals and logs in temporary directories. Every buyer it starts is
// killed at cleanup.
type CartRig struct {
	T        testing.TB
	Sale     CartSale
	DB       *gorm.DB
	DSN      string // with the rig's database
	Rdb      redis.UniversalClient
	Redis    CartBuyerConfig // the Redis fields of every buyer's config
	Journals string
	Pace     time.Duration // every buyer's pause between carts
	Buyers   []*CartBuyer
	bin      string
	logs     string
}

// NewCartRig creates the database, loads the sale through rdb (whose
// address the buyers are given in redisCfg: Redis, Sentinel or Cluster)
// and builds the buyer.
func NewCartRig(t testing.TB, dsn string, rdb redis.UniversalClient, redisCfg CartBuyerConfig, sale CartSale) *CartRig {
	t.Helper()
	cfg, err := mysqldrv.ParseDSN(dsn)
	if err != nil {
		t.Fatalf("parse SECKILL_MYSQL_DSN: %v", err)
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := "seckill_cart_" + hex.EncodeToString(b)
	cfg.DBName = ""
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	_, err = admin.Exec("CREATE DATABASE `" + name + "`")
	_ = admin.Close()
	if err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	DropMySQLAtCleanup(t, dsn, name)
	cfg.DBName = name
	r := &CartRig{T: t, Sale: sale, DB: OpenMySQL(t, dsn, name), DSN: cfg.FormatDSN(), Rdb: rdb, Redis: redisCfg,
		Journals: t.TempDir(), logs: t.TempDir()}
	if r.bin, err = BuildCartBuyer(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, b := range r.Buyers {
			if err := b.Kill(); err != nil {
				t.Error(err)
			}
			if t.Failed() {
				t.Logf("%s log tail:\n%s", b.Cfg.Name, Tail(b.LogPath, 15))
			}
		}
	})
	d := r.Deductor()
	if err := sale.Setup(context.Background(), r.DB, d); err != nil {
		t.Fatalf("cart sale setup: %v", err)
	}
	return r
}

// Deductor is a Deductor of the sale on the rig's Redis (no sold-out
// cache: it reads Redis every time).
func (r *CartRig) Deductor() *stock.Deductor {
	d, err := stock.New(r.Rdb, stock.WithKeyPrefix(r.Sale.Prefix), stock.WithoutSoldOutCache())
	if err != nil {
		r.T.Fatal(err)
	}
	return d
}

// StartBuyer starts buyer number i (named "buyer<i>", order machine i)
// with carts carts on workers workers; pause, when set, is its
// SECKILL_CART_PAUSE (its marker is returned).
func (r *CartRig) StartBuyer(i, carts, workers int, seed uint64, pause string) (*CartBuyer, string) {
	r.T.Helper()
	cfg := r.Redis
	cfg.Name, cfg.Machine, cfg.MySQL, cfg.Sale = "buyer"+strconv.Itoa(i), i, r.DSN, r.Sale
	cfg.Carts, cfg.Workers, cfg.Seed, cfg.Journals, cfg.Pace = carts, workers, seed, r.Journals, r.Pace
	if pause != "" {
		cfg.Pause, cfg.Marker = pause, filepath.Join(r.logs, cfg.Name+".paused")
	}
	b, err := StartCartBuyer(r.bin, r.logs, cfg)
	if err != nil {
		r.T.Fatal(err)
	}
	r.Buyers = append(r.Buyers, b)
	return b, cfg.Marker
}

// Restart starts b again with carts carts (a new run: it first settles
// what its killed runs left), with a new order machine.
func (r *CartRig) Restart(b *CartBuyer, carts int) {
	r.T.Helper()
	b.Cfg.Carts = carts
	b.Cfg.Machine += 64 * b.Starts
	if err := b.Start(); err != nil {
		r.T.Fatal(err)
	}
}

// WaitAll waits for every buyer to exit, each within bound, and fails the
// test on a buyer that failed.
func (r *CartRig) WaitAll(bound time.Duration) {
	r.T.Helper()
	for _, b := range r.Buyers {
		if err := b.Wait(bound); err != nil {
			r.T.Errorf("%s: %v\n%s", b.Cfg.Name, err, Tail(b.LogPath, 10))
		}
	}
}

// Reconcile runs the order reconciler over every unit and returns what it
// released.
func (r *CartRig) Reconcile() []string {
	r.T.Helper()
	rel, err := ReconcileCarts(context.Background(), r.DB, r.Deductor(), r.Sale, time.Millisecond)
	if err != nil {
		r.T.Fatal(err)
	}
	return rel
}

// Check counts every invariant (CheckCarts) and fails the test on each
// violation; it returns the counts.
func (r *CartRig) Check(what string, ck CartCheck) CartCount {
	r.T.Helper()
	c, viol, err := CheckCarts(context.Background(), r.DB, r.Rdb, r.Sale, r.Journals, ck)
	if err != nil {
		r.T.Fatalf("%s: count: %v", what, err)
	}
	r.T.Logf("%s: %s", what, c)
	var reasons []string
	for w, n := range c.Reasons {
		reasons = append(reasons, fmt.Sprintf("%d× %s", n, w))
	}
	sort.Strings(reasons)
	r.T.Logf("%s: reasons: %s", what, strings.Join(reasons, "; "))
	for _, v := range viol {
		r.T.Errorf("%s: VIOLATION: %s", what, v)
	}
	return c
}

// Cart returns the journal of cart id.
func (r *CartRig) Cart(id string) *Cart {
	r.T.Helper()
	carts, err := ReadJournals(r.Journals)
	if err != nil {
		r.T.Fatal(err)
	}
	if c := carts[id]; c != nil {
		return c
	}
	r.T.Fatalf("no cart %s in the journals", id)
	return nil
}

// PausedCart reads a paused buyer's marker: the ID of the cart it stopped.
func PausedCart(t testing.TB, marker string) string {
	t.Helper()
	b, err := os.ReadFile(marker)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// GroupEntry is the state of a line's allowance in the group's ledger
// ("R" taken, "X" given back, "T" tombstone, "" none).
func (r *CartRig) GroupEntry(lineID string) string {
	r.T.Helper()
	v, err := r.Rdb.HGet(context.Background(), GroupLedgerKey(r.Sale.Prefix, r.Sale.Group), lineID).Result()
	if err == redis.Nil {
		return ""
	}
	if err != nil {
		r.T.Fatal(err)
	}
	f := strings.Split(v, ":")
	if len(f) < 3 {
		r.T.Fatalf("group ledger entry %s: %q", lineID, v)
	}
	return f[2]
}

// LineHeld reports whether Redis holds line lineID of unit.
func (r *CartRig) LineHeld(unit, lineID string) bool {
	r.T.Helper()
	res, ok, err := r.Deductor().Lookup(context.Background(), unit, lineID)
	if err != nil {
		r.T.Fatal(err)
	}
	return ok && res.State == stock.Held
}

// String is the rig's buyers and their PIDs, for notes.
func (r *CartRig) String() string {
	var parts []string
	for _, b := range r.Buyers {
		parts = append(parts, fmt.Sprintf("%s(pid %d)", b.Cfg.Name, b.PID()))
	}
	return strings.Join(parts, " ")
}

// RebuildFrozen rebuilds, from the database's live lines, every unit the
// stock's data-loss fence froze (a buyer's Deductor saw its data lost or
// rolled back), as a Preloader with WithRecovery does once nothing is in
// flight (call it with every buyer ended). It returns the units rebuilt.
func (r *CartRig) RebuildFrozen() []string {
	r.T.Helper()
	ctx := context.Background()
	d := r.Deductor()
	var out []string
	for _, u := range r.Sale.Units() {
		st, err := d.Stats(ctx, u)
		if err != nil {
			r.T.Fatal(err)
		}
		if st.Loaded && !st.Frozen {
			continue
		}
		live, err := orderreconcile.LiveReservations(ctx, r.DB, u)
		if err != nil {
			r.T.Fatal(err)
		}
		rs := make([]stock.Reservation, len(live))
		for i, l := range live {
			rs[i] = stock.Reservation{ID: l.ID, User: l.User, Qty: l.Qty, State: stock.Held, ReservedAt: l.At}
		}
		if _, err := d.Rebuild(ctx, stock.Activity{ID: u, Stock: r.Sale.initial(u), PerUserLimit: r.Sale.limit(u),
			TTL: 24 * time.Hour}, rs); err != nil {
			r.T.Fatalf("rebuild %s: %v", u, err)
		}
		out = append(out, u)
	}
	return out
}

// RebuildGroup rebuilds the limit group's allowances after a loss, as an
// operator (or a recovery hook) does once the units are rebuilt and
// reconciled: stock.Deductor.RebuildGroup takes again, unit by unit, the
// allowances of the database's live lines that the group's Redis state
// lacks (lost takes), then the group's sweep gives back every allowance
// whose line is released (lost give-backs). Every line of the rig is in
// the group. It returns the allowances taken again and given back.
func (r *CartRig) RebuildGroup() (taken, given int) {
	r.T.Helper()
	ctx := context.Background()
	d := r.Deductor()
	lines := map[string][]stock.Reservation{}
	for _, u := range r.Sale.Units() {
		live, err := orderreconcile.LiveReservations(ctx, r.DB, u)
		if err != nil {
			r.T.Fatal(err)
		}
		rs := make([]stock.Reservation, len(live))
		for i, l := range live {
			rs[i] = stock.Reservation{ID: l.ID, User: l.User, Qty: l.Qty}
		}
		lines[u] = rs
	}
	taken, err := d.RebuildGroup(ctx, r.Sale.Group, lines)
	if err != nil {
		r.T.Fatalf("rebuild group %s: %v", r.Sale.Group, err)
	}
	given, err = d.SweepGroup(ctx, r.Sale.Group, 0)
	if err != nil {
		r.T.Fatalf("sweep group %s: %v", r.Sale.Group, err)
	}
	return taken, given
}

// Orders counts the orders written so far.
func (r *CartRig) Orders() int64 {
	var n int64
	if err := r.DB.Table("seckill_order").Count(&n).Error; err != nil {
		r.T.Fatal(err)
	}
	return n
}

// WaitOrders waits, at most bound, until n orders were written.
func (r *CartRig) WaitOrders(n int64, bound time.Duration) {
	r.T.Helper()
	deadline := time.Now().Add(bound)
	for r.Orders() < n {
		if time.Now().After(deadline) {
			r.T.Fatalf("fewer than %d orders within %v (%d)", n, bound, r.Orders())
		}
		time.Sleep(20 * time.Millisecond) // poll interval of a count
	}
}

// FreezeOrphaned freezes every unit for which the reconciler (a dry run)
// finds orphans: live order lines whose reservation is not in the Redis
// ledger, which a failover lost without any Deductor noticing (the fence
// judges the replies of the calls a Deductor makes; a unit a buyer no
// longer asks, sold out in its in-process cache, is not judged). It
// returns the units frozen; RebuildFrozen then rebuilds them.
func (r *CartRig) FreezeOrphaned() []string {
	r.T.Helper()
	ctx := context.Background()
	d := r.Deductor()
	rec, err := orderreconcile.NewReconciler(r.DB, checkout.Ledger(d), checkout.Releaser(d), orderreconcile.WithDryRun(true))
	if err != nil {
		r.T.Fatal(err)
	}
	var out []string
	for _, u := range r.Sale.Units() {
		rep, err := rec.Reconcile(ctx, u)
		if err != nil {
			r.T.Fatal(err)
		}
		if len(rep.Orphans) == 0 {
			continue
		}
		if err := d.Freeze(ctx, u); err != nil {
			r.T.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s (%d orphans)", u, len(rep.Orphans)))
	}
	return out
}
