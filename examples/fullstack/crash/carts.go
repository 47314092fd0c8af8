package crash

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/stock"
)

// The cart tier: buyer processes (./crash/cartbuyer, built by
// [BuildCartBuyer]) reserve 3-line carts with stock.Deductor.ReserveLines
// and write each reserved cart as one order with lines in one
// transaction (order.Processor.Handle, the consumer's write, with a
// TxHook holding the limit group's cap in the database), journaling every
// step; the tests kill them (kill -9), fail Redis over under them, and
// count with [CheckCarts].

// CartSale is the catalogue the cart buyers sell: line 0 and line 1 of
// every cart are Plain[0] and Plain[1] (1 to MaxQty units each), line 2
// one unit of a variant of Varied; every line counts against the limit group
// Group (GroupLimit units per buyer over the three sales).
type CartSale struct {
	Prefix       string   `json:"prefix"`        // the stock keys' prefix
	Plain        []string `json:"plain"`         // two activities without variants
	Varied       string   `json:"varied"`        // an activity with Variants
	Variants     []string `json:"variants"`      // its variants
	Stock        int64    `json:"stock"`         // units of each plain activity
	VariantStock int64    `json:"variant_stock"` // units of each variant
	UserLimit    int64    `json:"user_limit"`    // per buyer, per plain activity
	VariedLimit  int64    `json:"varied_limit"`  // per buyer over Varied's variants (and per variant)
	Group        string   `json:"group"`
	GroupLimit   int64    `json:"group_limit"`
	Users        int      `json:"users"`   // buyers u1..uN
	MaxQty       int64    `json:"max_qty"` // lines 0 and 1 take 1 to MaxQty units each
}

// DefaultCartSale is the sale of the cart scenarios: 2 × 40 plain units,
// 4 variants × 8, 30 buyers, at most 3 units of a plain sale, 2 of the
// varied one and 6 over the group per buyer: the group cap binds (a
// cart holds 3 to 5 units) and the stock sells out.
func DefaultCartSale(prefix string) CartSale {
	return CartSale{Prefix: prefix, Plain: []string{"cart-a", "cart-b"}, Varied: "cart-c",
		Variants: []string{"s", "m", "l", "xl"}, Stock: 40, VariantStock: 8, UserLimit: 3, VariedLimit: 2,
		Group: "product-p", GroupLimit: 6, Users: 30, MaxQty: 2}
}

// Units are the stock units the sale counts: the plain activities and
// every variant ("c/v"), sorted.
func (s CartSale) Units() []string {
	out := append([]string{}, s.Plain...)
	for _, v := range s.Variants {
		out = append(out, stock.VariantOf(s.Varied, v))
	}
	sort.Strings(out)
	return out
}

// initial is a unit's stock at the start.
func (s CartSale) initial(unit string) int64 {
	if strings.Contains(unit, "/") {
		return s.VariantStock
	}
	return s.Stock
}

// limit is a buyer's cap on a unit.
func (s CartSale) limit(unit string) int64 {
	if strings.Contains(unit, "/") {
		return s.VariedLimit
	}
	return s.UserLimit
}

// GroupTable is the database side of the limit group: one row per (buyer,
// group) with the units of the buyer's orders in the group, raised in the
// order's transaction only while it stays within the cap.
const GroupTable = "cart_group_held"

// Setup creates the order tables, the activity rows (every unit, and the
// varied activity's own row with 0 units, under which nothing is filed),
// the group table, and loads the sale into Redis through d.
func (s CartSale) Setup(ctx context.Context, db *gorm.DB, d *stock.Deductor) error {
	if len(s.Plain) != 2 || s.Varied == "" || len(s.Variants) == 0 || s.Group == "" || s.GroupLimit < 1 || s.Users < 1 || s.MaxQty < 1 {
		return fmt.Errorf("crash: a cart sale needs 2 plain activities, a varied one, a group and buyers: %+v", s)
	}
	if err := order.AutoMigrate(ctx, db); err != nil {
		return err
	}
	if err := db.Exec("CREATE TABLE IF NOT EXISTS " + GroupTable +
		" (user_id VARCHAR(64) NOT NULL, grp VARCHAR(64) NOT NULL, held BIGINT NOT NULL, PRIMARY KEY (user_id, grp))").Error; err != nil {
		return err
	}
	start, end := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2999, 1, 1, 0, 0, 0, 0, time.UTC)
	row := func(id string, units, limit int64) order.Activity {
		return order.Activity{ID: id, Name: id, Stock: units, Remaining: units, PerUserLimit: limit, ActivityPrice: 100,
			Status: order.ActivityActive, Start: start, End: end}
	}
	rows := []order.Activity{row(s.Varied, 0, s.VariedLimit)}
	for _, u := range s.Units() {
		rows = append(rows, row(u, s.initial(u), s.limit(u)))
	}
	if err := db.Create(&rows).Error; err != nil {
		return err
	}
	for _, a := range s.Plain {
		if _, err := d.Load(ctx, stock.Activity{ID: a, Stock: s.Stock, PerUserLimit: s.UserLimit, TTL: 24 * time.Hour}); err != nil {
			return err
		}
	}
	var vs []stock.Variant
	for _, v := range s.Variants {
		vs = append(vs, stock.Variant{ID: v, Stock: s.VariantStock})
	}
	_, err := d.Load(ctx, stock.Activity{ID: s.Varied, PerUserLimit: s.VariedLimit, Variants: vs, TTL: 24 * time.Hour})
	return err
}

// CartLine is one line of a journaled cart.
type CartLine struct {
	Unit string `json:"unit"`
	Qty  int64  `json:"qty"`
}

// CartRecord is one line of a buyer's journal: K is B (begun: the cart
// about to be reserved, with its buyer and lines), R (reserved), O (its
// order committed, Order its number), F (finished without an order and
// holding nothing: refused, or released; Why says which) or E (an error
// left it unsettled: the reconciler and the next start settle it).
type CartRecord struct {
	K     string     `json:"k"`
	ID    string     `json:"id"`
	User  string     `json:"user,omitempty"`
	Lines []CartLine `json:"lines,omitempty"`
	Order string     `json:"order,omitempty"`
	Why   string     `json:"why,omitempty"`
}

// StockLines is the stock request of the cart.
func (s CartSale) StockLines(c CartRecord) stock.Lines {
	req := stock.Lines{User: c.User, ReservationID: c.ID}
	for _, l := range c.Lines {
		req.Lines = append(req.Lines, stock.Line{Activity: l.Unit, Qty: l.Qty, Group: s.Group, GroupLimit: s.GroupLimit})
	}
	return req
}

// Cart is what the journals say of one cart: its begin record and every
// later record's kind, in order.
type Cart struct {
	CartRecord
	Kinds []string
	Whys  []string // the Why of its F and E records
	Order string
}

// ReadJournals reads every journal (*.jsonl) of dir, by cart ID. A last
// line cut by a kill is ignored.
func ReadJournals(dir string) (map[string]*Cart, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil {
		return nil, err
	}
	out := map[string]*Cart{}
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			var r CartRecord
			if json.Unmarshal(sc.Bytes(), &r) != nil {
				continue
			}
			c := out[r.ID]
			if c == nil {
				c = &Cart{}
				out[r.ID] = c
			}
			if r.K == "B" {
				c.CartRecord = r
			}
			if r.K == "O" {
				c.Order = r.Order
			}
			c.Kinds = append(c.Kinds, r.K)
			if r.Why != "" {
				c.Whys = append(c.Whys, r.Why)
			}
		}
		_ = fh.Close()
		if err := sc.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// BuildCartBuyer compiles the cart buyer (./crash/cartbuyer) into dir.
func BuildCartBuyer(dir string) (string, error) {
	out := filepath.Join(dir, "cartbuyer")
	cmd := exec.Command("go", "build", "-o", out, ServicePackage+"/crash/cartbuyer")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("crash: go build cartbuyer: %w\n%s", err, b)
	}
	return out, nil
}

// CartBuyerConfig is a cart buyer's command line.
type CartBuyerConfig struct {
	Name     string // the buyer's name: its carts' IDs and journals start with it
	Machine  int    // the order ID generator's machine (distinct per running buyer)
	Redis    string // host:port of a standalone Redis, or
	Sentinel string // "master@host:port,…" of a Sentinel-managed Redis, or
	Cluster  string // "host:port,…" of a Redis Cluster
	MySQL    string // DSN of the database (with its name)
	Sale     CartSale
	Carts    int           // carts to try
	Workers  int           // carts in flight at once
	Seed     uint64        // the carts' users and quantities
	Pace     time.Duration // each worker's pause between carts (0: none)
	Journals string        // the journal directory
	// Pause, when set, is "n:step": the buyer's n-th cart stops before
	// reserving line step (1 or 2: between the lines) or before its order
	// ("order"), writes Marker and waits for its kill.
	Pause, Marker string
}

func (c CartBuyerConfig) args() ([]string, error) {
	sale, err := json.Marshal(c.Sale)
	if err != nil {
		return nil, err
	}
	a := []string{"-name", c.Name, "-machine", strconv.Itoa(c.Machine), "-mysql", c.MySQL, "-sale", string(sale),
		"-carts", strconv.Itoa(c.Carts), "-workers", strconv.Itoa(c.Workers), "-seed", strconv.FormatUint(c.Seed, 10),
		"-journals", c.Journals, "-pace", c.Pace.String()}
	switch {
	case c.Redis != "":
		a = append(a, "-redis", c.Redis)
	case c.Sentinel != "":
		a = append(a, "-sentinel", c.Sentinel)
	case c.Cluster != "":
		a = append(a, "-cluster", c.Cluster)
	default:
		return nil, errors.New("crash: a cart buyer needs -redis, -sentinel or -cluster")
	}
	return a, nil
}

// CartBuyer is a running cart buyer process.
type CartBuyer struct {
	Cfg     CartBuyerConfig
	LogPath string
	Starts  int
	bin     string
	p       *proc
}

// StartCartBuyer starts a cart buyer; Kill or Wait ends it.
func StartCartBuyer(bin, logDir string, cfg CartBuyerConfig) (*CartBuyer, error) {
	b := &CartBuyer{Cfg: cfg, bin: bin, LogPath: filepath.Join(logDir, cfg.Name+".log")}
	return b, b.Start()
}

// Start starts the buyer (again: a restart recovers the carts its killed
// runs left unsettled, then buys).
func (b *CartBuyer) Start() error {
	if b.p != nil && b.p.alive() {
		return fmt.Errorf("crash: cart buyer %s still running", b.Cfg.Name)
	}
	args, err := b.Cfg.args()
	if err != nil {
		return err
	}
	env := ChildEnv()
	if b.Cfg.Pause != "" && b.Starts == 0 { // the first run only
		env = append(env, "SECKILL_CART_PAUSE="+b.Cfg.Pause, "SECKILL_CART_MARKER="+b.Cfg.Marker)
	}
	b.Starts++
	b.p, err = startProc(b.bin, args, env, b.LogPath)
	return err
}

// PID is the running process's ID (0 when down).
func (b *CartBuyer) PID() int {
	if b.p == nil || !b.p.alive() {
		return 0
	}
	return b.p.pid()
}

// Kill is kill -9 by PID; it returns once the process is gone.
func (b *CartBuyer) Kill() error {
	if b.p == nil {
		return nil
	}
	return b.p.kill()
}

// Wait waits, at most bound, for the buyer to exit and returns its exit
// error.
func (b *CartBuyer) Wait(bound time.Duration) error {
	if b.p == nil {
		return nil
	}
	t := time.NewTimer(bound)
	defer t.Stop()
	select {
	case <-b.p.exited:
		return b.p.err
	case <-t.C:
		_ = b.p.kill()
		return fmt.Errorf("crash: cart buyer %s still running after %v (killed)", b.Cfg.Name, bound)
	}
}

// Exited is closed once the current run exited.
func (b *CartBuyer) Exited() <-chan struct{} { return b.p.exited }

// WaitFile waits, at most bound, until path exists (a paused buyer's
// marker), or proc exits first.
func WaitFile(path string, b *CartBuyer, bound time.Duration) error {
	deadline := time.Now().Add(bound)
	for {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		if b.PID() == 0 {
			return fmt.Errorf("crash: %s exited before writing %s", b.Cfg.Name, path)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("crash: no %s within %v", path, bound)
		}
		select {
		case <-b.p.exited:
		case <-time.After(20 * time.Millisecond): // poll interval of a file's appearance
		}
	}
}

// GroupHeldKey is the Redis hash of a limit group's allowances (user →
// units), as the stock package lays it out.
func GroupHeldKey(prefix, group string) string { return prefix + "{g:" + group + "}:held" }

// GroupLedgerKey is the Redis hash of a limit group's line ledger.
func GroupLedgerKey(prefix, group string) string { return prefix + "{g:" + group + "}:resv" }

// GroupMetaKey is the Redis hash of a limit group's data-loss fence
// (epoch, seq, born, origin, frozen).
func GroupMetaKey(prefix, group string) string { return prefix + "{g:" + group + "}:meta" }

// NewRedisClient returns a client of a standalone Redis, a
// Sentinel-managed one ("master@host:port,…") or a Cluster
// ("host:port,…"), exactly one of them set.
func NewRedisClient(addr, sentinel, cluster string) (redis.UniversalClient, error) {
	switch {
	case addr != "":
		return redis.NewClient(&redis.Options{Addr: addr, DialTimeout: time.Second, ReadTimeout: 2 * time.Second}), nil
	case sentinel != "":
		name, addrs, ok := strings.Cut(sentinel, "@")
		if !ok {
			return nil, fmt.Errorf("crash: sentinel %q: want master@host:port,…", sentinel)
		}
		return redis.NewFailoverClient(&redis.FailoverOptions{MasterName: name, SentinelAddrs: strings.Split(addrs, ","),
			DialTimeout: time.Second, ReadTimeout: 2 * time.Second}), nil
	case cluster != "":
		return redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(cluster, ","),
			DialTimeout: time.Second, ReadTimeout: 2 * time.Second}), nil
	}
	return nil, errors.New("crash: no Redis address")
}
