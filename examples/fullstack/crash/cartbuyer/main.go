// Command cartbuyer is the buyer process of the crash tier's cart
// scenarios (package crash, CartBuyerConfig): it reserves 3-line carts
// with stock.Deductor.ReserveLines (two plain sales and a variant of a
// third, every line in one limit group) and writes each reserved cart as
// one order with lines in one transaction (order.Processor.Handle, the
// consumer's write), whose TxHook holds the limit group's cap in the
// database (a row per buyer and group, raised only within the cap). A
// cart the database refuses is released with ReleaseLines, as the
// consumer releases a refused cart. Every step is appended to a journal
// (<journals>/<name>-<pid>.jsonl, one JSON record a line, written before
// the next step starts), which survives a kill -9.
//
// At start it settles what its killed runs left (a cart begun without an
// order or an end): an order found in the database for the cart is
// journaled as its order, otherwise the cart is released with
// ReleaseLines (stock and limit-group allowances, exactly once; a line
// the reconciler released already is left as it is). Carts an error left
// unsettled are settled the same way before it exits.
//
// SECKILL_CART_PAUSE="n:step" (with SECKILL_CART_MARKER=file) stops its
// n-th cart before the Redis call that reserves line step (1 or 2: after
// the lines before it are held, between the lines) or before its order
// ("order"), writes the marker file and waits there until it is killed:
// the kill lands between the lines deterministically. The pause is a
// go-redis hook of this process, no seam of the stock package.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	mysqldrv "github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	"gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/seckillkit/seckill/examples/fullstack/crash"
	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/order/orderid"
	"github.com/seckillkit/seckill/stock"
)

// errGroupDB is the TxHook's refusal: the order would take the buyer
// beyond the limit group's cap in the database.
var errGroupDB = errors.New("cartbuyer: the limit group's cap in the database")

type buyer struct {
	name string
	sale crash.CartSale
	d    *stock.Deductor
	db   *gorm.DB
	proc *order.Processor

	mu      sync.Mutex
	journal *os.File

	pauseN    int64
	pauseStep string
	marker    string
	pid       int

	unsettledMu sync.Mutex
	unsettled   []crash.CartRecord
}

func main() {
	log.SetFlags(log.Lmicroseconds)
	name := flag.String("name", "buyer", "the buyer's name (carts and journals start with it)")
	machine := flag.Int("machine", 1, "order ID machine")
	addr := flag.String("redis", "", "standalone Redis host:port")
	sentinel := flag.String("sentinel", "", "Sentinel-managed Redis: master@host:port,…")
	cluster := flag.String("cluster", "", "Redis Cluster: host:port,…")
	dsn := flag.String("mysql", "", "MySQL/MariaDB DSN with the database")
	saleJSON := flag.String("sale", "", "the sale (crash.CartSale as JSON)")
	carts := flag.Int("carts", 100, "carts to try")
	workers := flag.Int("workers", 4, "carts in flight")
	seed := flag.Uint64("seed", 1, "seed of the carts")
	journals := flag.String("journals", "", "journal directory")
	pace := flag.Duration("pace", 0, "each worker's pause between carts (a load shape)")
	flag.Parse()
	if err := run(*name, *machine, *addr, *sentinel, *cluster, *dsn, *saleJSON, *carts, *workers, *seed, *journals, *pace); err != nil {
		log.Fatal(err)
	}
}

func run(name string, machine int, addr, sentinel, cluster, dsn, saleJSON string, carts, workers int, seed uint64, journals string, pace time.Duration) error {
	b := &buyer{name: name, pid: os.Getpid()}
	if err := json.Unmarshal([]byte(saleJSON), &b.sale); err != nil {
		return fmt.Errorf("-sale: %w", err)
	}
	if journals == "" || dsn == "" || carts < 0 || workers < 1 {
		return errors.New("cartbuyer: -journals, -mysql, -carts >= 0 and -workers >= 1 are needed")
	}
	rdb, err := crash.NewRedisClient(addr, sentinel, cluster)
	if err != nil {
		return err
	}
	defer rdb.Close()
	if p := os.Getenv("SECKILL_CART_PAUSE"); p != "" {
		n, step, ok := strings.Cut(p, ":")
		b.pauseN, _ = strconv.ParseInt(n, 10, 64)
		if !ok || b.pauseN < 1 || (step != "1" && step != "2" && step != "order") {
			return fmt.Errorf("SECKILL_CART_PAUSE=%q: want n:1, n:2 or n:order", p)
		}
		b.pauseStep, b.marker = step, os.Getenv("SECKILL_CART_MARKER")
		if step != "order" {
			rdb.AddHook(pauseHook{b: b, id: b.cartID(b.pauseN) + "#" + step})
		}
	}
	if b.d, err = stock.New(rdb, stock.WithKeyPrefix(b.sale.Prefix)); err != nil {
		return err
	}
	cfg, err := mysqldrv.ParseDSN(dsn)
	if err != nil {
		return err
	}
	cfg.ParseTime, cfg.Loc = true, time.UTC
	if b.db, err = gorm.Open(mysql.Open(cfg.FormatDSN()), &gorm.Config{Logger: logger.Discard}); err != nil {
		return err
	}
	gen, err := orderid.New(int64(machine))
	if err != nil {
		return err
	}
	if b.proc, err = order.NewProcessor(b.db, gen, order.WithTxHook(b.groupHook)); err != nil {
		return err
	}
	ctx := context.Background()
	if err := b.recoverRuns(ctx, journals); err != nil {
		return err
	}
	if b.journal, err = os.OpenFile(filepath.Join(journals, fmt.Sprintf("%s-%d.jsonl", name, b.pid)),
		os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err != nil {
		return err
	}
	defer b.journal.Close()
	b.write(crash.CartRecord{K: "S", ID: "start"})

	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				n := next.Add(1)
				if n > int64(carts) {
					return
				}
				b.cart(ctx, n, rand.New(rand.NewPCG(seed, uint64(b.pid)<<20+uint64(n))))
				if pace > 0 {
					time.Sleep(pace) // the load's shape: carts spread over time
				}
			}
		}()
	}
	wg.Wait()
	// Settle what errors left (Redis failing over, say), with a bound.
	deadline := time.Now().Add(90 * time.Second)
	for pause := 100 * time.Millisecond; ; pause = min(2*pause, 2*time.Second) {
		b.unsettledMu.Lock()
		left := b.unsettled
		b.unsettled = nil
		b.unsettledMu.Unlock()
		var still []crash.CartRecord
		for _, c := range left {
			if err := b.settle(ctx, c, "settled"); err != nil {
				log.Printf("settle %s: %v", c.ID, err)
				still = append(still, c)
			}
		}
		if len(still) == 0 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cartbuyer: %d carts left unsettled", len(still))
		}
		b.unsettledMu.Lock()
		b.unsettled = append(b.unsettled, still...)
		b.unsettledMu.Unlock()
		time.Sleep(pause) // a retry's back-off, not a synchronisation
	}
	log.Printf("cartbuyer %s done: %d carts", name, carts)
	return nil
}

func (b *buyer) cartID(n int64) string { return fmt.Sprintf("%s-%d-%d", b.name, b.pid, n) }

// write appends r to the journal (one write call: a kill leaves at most a
// cut last line, which readers ignore).
func (b *buyer) write(r crash.CartRecord) {
	line, _ := json.Marshal(r)
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, err := b.journal.Write(append(line, '\n')); err != nil {
		log.Fatalf("journal: %v", err)
	}
}

// pause writes the marker and waits for the kill.
func (b *buyer) pause(id string) {
	log.Printf("paused: cart %s at step %s, waiting for the kill", id, b.pauseStep)
	if err := os.WriteFile(b.marker, []byte(id), 0o644); err != nil {
		log.Fatalf("marker: %v", err)
	}
	for {
		time.Sleep(time.Hour) // waits for kill -9
	}
}

// pauseHook stops the paused cart before the Redis call that reserves its
// line id (a script call naming the ID, not a limit group's).
type pauseHook struct {
	b  *buyer
	id string
}

func (h pauseHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h pauseHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h pauseHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if n := cmd.Name(); n == "evalsha" || n == "eval" {
			hit, group := false, false
			for _, a := range cmd.Args() {
				if s, ok := a.(string); ok {
					hit = hit || s == h.id
					group = group || strings.Contains(s, "{g:")
				}
			}
			if hit && !group {
				cart, _, _ := strings.Cut(h.id, "#")
				h.b.pause(cart)
			}
		}
		return next(ctx, cmd)
	}
}

// groupHook is the database side of the limit group: the buyer's row is
// raised by the order's units in the group only within the cap (the row
// lock orders concurrent orders of one buyer); beyond it the order is
// refused (the transaction rolls back).
func (b *buyer) groupHook(ctx context.Context, tx *gorm.DB, orders []order.Order) error {
	for _, o := range orders {
		var n int64
		for _, l := range o.Lines {
			n += l.Qty
		}
		// One upsert takes the row's exclusive lock at once (an INSERT
		// IGNORE then an UPDATE would take a shared lock first, and two
		// orders of one buyer would deadlock upgrading it).
		if err := tx.Exec("INSERT INTO "+crash.GroupTable+" (user_id, grp, held) VALUES (?, ?, ?) ON DUPLICATE KEY UPDATE held = held + VALUES(held)",
			o.UserID, b.sale.Group, n).Error; err != nil {
			return err
		}
		var held int64
		if err := tx.Raw("SELECT held FROM "+crash.GroupTable+" WHERE user_id = ? AND grp = ?", o.UserID, b.sale.Group).Scan(&held).Error; err != nil {
			return err
		}
		if held > b.sale.GroupLimit {
			return order.Permanent(errGroupDB)
		}
	}
	return nil
}

// cart is one cart: reserve, order, journal.
func (b *buyer) cart(ctx context.Context, n int64, rng *rand.Rand) {
	s := b.sale
	c := crash.CartRecord{K: "B", ID: b.cartID(n), User: "u" + strconv.Itoa(1+rng.IntN(s.Users)), Lines: []crash.CartLine{
		{Unit: s.Plain[0], Qty: 1 + rng.Int64N(max(s.MaxQty, 1))},
		{Unit: s.Plain[1], Qty: 1 + rng.Int64N(max(s.MaxQty, 1))},
		{Unit: stock.VariantOf(s.Varied, s.Variants[rng.IntN(len(s.Variants))]), Qty: 1},
	}}
	if n == b.pauseN {
		c.User = "p-" + b.name // the paused cart's buyer buys nothing else: no cap refuses it before its pause
	}
	b.write(c)
	res, err := b.d.ReserveLines(ctx, s.StockLines(c))
	if err != nil {
		b.fail(c, "reserve: "+err.Error())
		return
	}
	if res.Status != stock.Reserved {
		b.write(crash.CartRecord{K: "F", ID: c.ID, Why: fmt.Sprintf("refused line %d: %v (group %v)", res.Line, res.Status, res.Group)})
		return
	}
	b.write(crash.CartRecord{K: "R", ID: c.ID})
	if n == b.pauseN && b.pauseStep == "order" {
		b.pause(c.ID)
	}
	m := order.Message{Version: order.MessageVersion, MsgID: c.ID, ReservationID: c.ID, ActivityID: s.Plain[0],
		UserID: c.User, CreatedAt: time.Now().UTC()}
	for _, l := range c.Lines {
		m.Lines = append(m.Lines, order.Line{ActivityID: l.Unit, Qty: l.Qty})
	}
	out, err := b.proc.Handle(ctx, m)
	for try := 1; err != nil && !errors.Is(err, errGroupDB) && try < 5; try++ {
		// A failed transaction (a deadlock, say) rolled back: the
		// consumer would retry it, and so does the buyer.
		log.Printf("cart %s: order: %v (try %d)", c.ID, err, try)
		time.Sleep(time.Duration(try) * 20 * time.Millisecond) // a retry's back-off
		out, err = b.proc.Handle(ctx, m)
	}
	switch {
	case errors.Is(err, errGroupDB):
		b.release(ctx, c, "refused by the database's group cap")
	case err != nil:
		b.fail(c, "order: "+err.Error())
	case out.Status == order.StatusSuccess:
		b.write(crash.CartRecord{K: "O", ID: c.ID, Order: out.OrderNo})
	default:
		b.release(ctx, c, "refused by the database: "+out.Reason)
	}
}

// release gives a refused cart back (stock and allowances), or leaves it
// to the final settling when Redis fails.
func (b *buyer) release(ctx context.Context, c crash.CartRecord, why string) {
	if _, err := b.d.ReleaseLines(ctx, b.sale.StockLines(c)); err != nil {
		b.fail(c, why+"; release: "+err.Error())
		return
	}
	b.write(crash.CartRecord{K: "F", ID: c.ID, Why: why})
}

// fail journals an error and settles the cart at once (its order if the
// database has one, else ReleaseLines: a reservation or allowance an
// errored call still writes later finds a tombstone and takes nothing),
// or, when that fails too, before the buyer exits.
func (b *buyer) fail(c crash.CartRecord, why string) {
	b.write(crash.CartRecord{K: "E", ID: c.ID, Why: why})
	if err := b.settle(context.Background(), c, "settled after an error"); err == nil {
		return
	}
	b.unsettledMu.Lock()
	b.unsettled = append(b.unsettled, c)
	b.unsettledMu.Unlock()
}

// settle ends a cart left without an end: its order if the database has
// one, else ReleaseLines.
func (b *buyer) settle(ctx context.Context, c crash.CartRecord, why string) error {
	var no []string
	if err := b.db.Raw("SELECT order_no FROM seckill_order WHERE reservation_id = ?", c.ID).Scan(&no).Error; err != nil {
		return err
	}
	if len(no) > 0 {
		b.write(crash.CartRecord{K: "O", ID: c.ID, Order: no[0]})
		return nil
	}
	if _, err := b.d.ReleaseLines(ctx, b.sale.StockLines(c)); err != nil {
		return err
	}
	b.write(crash.CartRecord{K: "F", ID: c.ID, Why: why})
	return nil
}

// recoverRuns settles the carts this buyer's earlier runs (journals
// <name>-<pid>.jsonl of other pids) left without an end.
func (b *buyer) recoverRuns(ctx context.Context, dir string) error {
	carts, err := crash.ReadJournals(dir)
	if err != nil {
		return err
	}
	var open []crash.CartRecord
	own := fmt.Sprintf("%s-%d-", b.name, b.pid)
	for id, c := range carts {
		if !strings.HasPrefix(id, b.name+"-") || strings.HasPrefix(id, own) || c.K != "B" ||
			c.Order != "" || containsK(c.Kinds, "F") {
			continue
		}
		open = append(open, c.CartRecord)
	}
	if len(open) == 0 {
		return nil
	}
	f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("%s-%d.jsonl", b.name, b.pid)), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	b.journal = f
	for _, c := range open {
		if err := b.settle(ctx, c, "recovered after a kill"); err != nil {
			return fmt.Errorf("recover %s: %w", c.ID, err)
		}
	}
	log.Printf("cartbuyer %s: settled %d carts of its killed runs", b.name, len(open))
	return f.Close()
}

func containsK(ks []string, k string) bool {
	for _, x := range ks {
		if x == k {
			return true
		}
	}
	return false
}
