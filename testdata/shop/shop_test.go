package shop

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/glebarez/sqlite"
	mysqldrv "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/twmb/franz-go/pkg/kfake"
	"gorm.io/driver/mysql"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/order/handoff"
	"github.com/seckillkit/seckill/order/orderid"
	"github.com/seckillkit/seckill/order/orderkafka"
	"github.com/seckillkit/seckill/outbox"
)

const (
	topic    = "shop.orders"
	envMySQL = "SECKILL_MYSQL_DSN"
	envPG    = "SECKILL_POSTGRES_DSN"
)

// The shop on each database: SQLite always, MariaDB and PostgreSQL when
// their DSN is set (a fresh database each, dropped at the end).
func TestShopOnEachDatabase(t *testing.T) {
	for _, tc := range []struct {
		name string
		open func(t *testing.T) *gorm.DB
	}{{"sqlite", openSQLite}, {"mysql", openMySQL}, {"postgres", openPostgres}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			runShop(t, tc.open(t))
		})
	}
}

// sale is one of the shop's flash sales.
type sale struct {
	id    string
	stock int64
	cap   int64
}

var sales = []sale{{"spring.sale-2026", 30, 1}, {"spring.bundle-2026", 25, 2}}

// buy is one reservation the shop submitted.
type buy struct {
	m   order.Message
	sku string
}

// runShop sells both sales to UUID buyers through order's Submitter (Kafka,
// an outbox fallback when a publish fails, relayed), consumed by a group
// that rebalances twice and restarts a member, with duplicates, then
// counts the invariants in SQL.
func runShop(t *testing.T, db *gorm.DB) {
	ctx := context.Background()
	must(t, Migrate(ctx, db))
	start := time.Now()
	for i, s := range sales {
		must(t, db.Table(OrderTables.Activity).Create(&order.Activity{ID: s.id, Name: s.id, ProductID: int64(7001 + i),
			ProductName: "sku-" + s.id, OriginalPrice: 1990, ActivityPrice: 990, Stock: s.stock, Remaining: s.stock,
			PerUserLimit: s.cap, Status: 1, Start: start, End: start.Add(time.Hour)}).Error)
	}
	stock := newStockLedger()

	brokers := startKafka(t)
	sp, err := sarama.NewSyncProducer(brokers, saramaConfig())
	must(t, err)
	t.Cleanup(func() { _ = sp.Close() })
	prod, err := orderkafka.NewProducer(sp, topic)
	must(t, err)
	var publishes atomic.Int64
	flaky := handoff.Publisher(func(ctx context.Context, m order.Message) error {
		if publishes.Add(1)%4 == 0 {
			return errors.New("kafka hiccup") // this one goes to the outbox
		}
		return prod.Publish(ctx, m)
	})
	w, err := outbox.NewWriter(outbox.WithTable(OutboxTable))
	must(t, err)
	fence, err := handoff.NewFence(db, stock, handoff.WithTables(OrderTables))
	must(t, err)
	sub, err := handoff.NewSubmitter(flaky, OutboxFallback{DB: db, Writer: w, Topic: topic}.Store, fence)
	must(t, err)
	obPub, err := outbox.NewSaramaPublisher(sp)
	must(t, err)
	relay, err := outbox.NewRelay(db, obPub, outbox.WithTable(OutboxTable), outbox.WithPollInterval(20*time.Millisecond))
	must(t, err)
	relayCtx, stopRelay := context.WithCancel(ctx)
	relayDone := make(chan error, 1)
	go func() { relayDone <- relay.Run(relayCtx) }()
	t.Cleanup(func() { stopRelay(); <-relayDone })

	var delivered atomic.Int64
	var dlqMu sync.Mutex
	var dead []error
	newConsumer := func(machine int64) *orderkafka.Handler {
		ids, err := orderid.New(machine)
		must(t, err)
		p, err := order.NewProcessor(db, ids, order.WithTables(OrderTables), order.WithTxHook(WriteShopOrders))
		must(t, err)
		c, err := order.NewConsumer(p, stock, order.WithBatchSize(16),
			order.WithNotifier(notifierFunc(func(context.Context, order.Result) { delivered.Add(1) })),
			order.WithDeadLetter(deadLetterFunc(func(_ context.Context, _ order.Record, cause error) error {
				dlqMu.Lock()
				dead = append(dead, cause)
				dlqMu.Unlock()
				return nil
			})))
		must(t, err)
		h, err := orderkafka.NewHandler(c, orderkafka.WithLinger(time.Millisecond))
		must(t, err)
		return h
	}

	// The buyers: UUIDs. Every 5th buys the cap-1 sale twice, every 4th
	// the cap-2 sale three times: the database refuses the extra ones.
	var buys []buy
	for u := 0; u < 36; u++ {
		user := newUUID(t)
		for k := 0; k < 1+b2i(u%5 == 0); k++ {
			buys = append(buys, newBuy(t, sales[0].id, user, len(buys)))
		}
		for k := 0; k < 1+2*b2i(u%4 == 0); k++ {
			buys = append(buys, newBuy(t, sales[1].id, user, len(buys)))
		}
	}
	var submitted []buy
	var dups int64
	submit := func(bs []buy) {
		for _, b := range bs {
			if !stock.reserve(b.m.ActivityID, b.m.ReservationID) {
				continue // sold out in "Redis": no message
			}
			route, err := sub.Submit(ctx, b.m)
			must(t, err)
			if route == handoff.RouteNone {
				t.Fatalf("submit %s: no route", b.m.ReservationID)
			}
			submitted = append(submitted, b)
		}
	}
	dedup := func() int64 { return count(t, db, "SELECT COUNT(*) FROM "+OrderTables.Dedup) }

	half := len(buys) / 2
	submit(buys[:half])
	r1 := runGroup(t, brokers, "shop", newConsumer(1))
	eventually(t, func() bool { return dedup() == int64(len(submitted)) }, "first half consumed")

	r2 := runGroup(t, brokers, "shop", newConsumer(2)) // a second member: rebalance
	submit(buys[half:])
	for i := 0; i < half; i += 3 { // Kafka delivers some again
		must(t, prod.Publish(ctx, submitted[i].m))
		dups++
	}
	r1.stop() // a member leaves and comes back: restart, rebalance
	r3 := runGroup(t, brokers, "shop", newConsumer(3))
	eventually(t, func() bool {
		b, err := outbox.Stats(ctx, db, outbox.WithTable(OutboxTable))
		return err == nil && b.Pending == 0 && dedup() == int64(len(submitted)) &&
			delivered.Load() >= int64(len(submitted))+dups
	}, "everything consumed, the duplicates too, the outbox drained")
	r2.stop()
	r3.stop()
	stopRelay()
	if err := <-relayDone; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("relay: %v", err)
	}
	relayDone <- nil // for the cleanup

	// The invariants, straight from SQL.
	n := int64(len(submitted))
	ord, ded, shop := OrderTables.Order, OrderTables.Dedup, ShopOrdersTable
	orders := count(t, db, "SELECT COUNT(*) FROM "+ord)
	failed := count(t, db, "SELECT COUNT(*) FROM "+ded+" WHERE outcome = 'FAILED'")
	eq(t, "one outcome per accepted message", n, dedup())
	eq(t, "one order per accepted message that succeeded", n-failed, orders)
	eq(t, "distinct reservations of orders", orders, count(t, db, "SELECT COUNT(DISTINCT reservation_id) FROM "+ord))
	eq(t, "success outcomes with their order", orders, count(t, db, "SELECT COUNT(*) FROM "+ded+" d JOIN "+ord+
		" o ON o.order_no = d.order_no AND o.reservation_id = d.reservation_id WHERE d.outcome = 'SUCCESS'"))
	eq(t, "failed outcomes released", failed, int64(stock.releases()))
	eq(t, "failed outcomes without an order", failed, count(t, db, "SELECT COUNT(*) FROM "+ded+" d WHERE d.outcome = 'FAILED' AND "+
		"NOT EXISTS (SELECT 1 FROM "+ord+" o WHERE o.reservation_id = d.reservation_id)"))
	if failed == 0 {
		t.Errorf("no cap refusal: the test lost its point")
	}
	eq(t, "one shop row per order", orders, count(t, db, "SELECT COUNT(*) FROM "+shop))
	eq(t, "shop rows matching their order", orders, count(t, db, "SELECT COUNT(*) FROM "+shop+" s JOIN "+ord+" o ON o.order_no = s.order_no "+
		"AND o.reservation_id = s.reservation_id AND o.user_id = s.user_id AND o.activity_id = s.sale_id AND o.price = s.price_paid / 100.0"))
	eq(t, "UUID buyers", orders, count(t, db, "SELECT COUNT(*) FROM "+ord+" WHERE LENGTH(user_id) = 36"))
	eq(t, "buyers above their cap", 0, count(t, db, "SELECT COUNT(*) FROM (SELECT o.activity_id, o.user_id FROM "+ord+" o JOIN "+
		OrderTables.Activity+" a ON a.id = o.activity_id WHERE o.status <> 'CANCELLED' GROUP BY o.activity_id, o.user_id, a.user_limit "+
		"HAVING SUM(o.qty) > a.user_limit) x"))
	for _, s := range sales {
		live := count(t, db, "SELECT COALESCE(SUM(qty), 0) FROM "+ord+" WHERE activity_id = ? AND status <> 'CANCELLED'", s.id)
		left := count(t, db, "SELECT stock FROM "+OrderTables.Activity+" WHERE id = ?", s.id)
		eq(t, "DB stock + sold = total for "+s.id, s.stock, left+live)
		eq(t, "Redis holds = sold for "+s.id, live, stock.held(s.id))
	}
	eq(t, "outbox rows not SENT", 0, count(t, db, "SELECT COUNT(*) FROM "+OutboxTable+" WHERE status <> 'SENT'"))
	if count(t, db, "SELECT COUNT(*) FROM "+OutboxTable) == 0 {
		t.Errorf("no message went through the outbox: the test lost its point")
	}
	// The shop's payload reached its rows.
	var rows []ShopOrder
	must(t, db.Find(&rows).Error)
	want := map[string]string{}
	for _, b := range submitted {
		want[b.m.ReservationID] = b.sku
	}
	for _, r := range rows {
		if want[r.ReservationID] != r.SKU || r.Channel != "app" {
			t.Errorf("shop row %s: sku %q channel %q, want %q app", r.OrderNo, r.SKU, r.Channel, want[r.ReservationID])
		}
	}
	dlqMu.Lock()
	defer dlqMu.Unlock()
	if len(dead) > 0 {
		t.Errorf("dead-lettered: %v", dead)
	}
	t.Logf("%d reservations, %d orders, %d refused and released, %d duplicates, %d via the outbox, %d deliveries",
		n, orders, failed, dups, count(t, db, "SELECT COUNT(*) FROM "+OutboxTable), delivered.Load())
}

func newBuy(t *testing.T, saleID, user string, i int) buy {
	sku := fmt.Sprintf("SKU-%03d", i%7)
	m, err := NewMessage(fmt.Sprintf("resv-%s-%d", saleID, i), saleID, user, Payload{SKU: sku, Channel: "app", PricePaid: 990})
	must(t, err)
	return buy{m: m, sku: sku}
}

// stockLedger stands for the Redis stock of stock.Deductor: reservations
// by ID against a number of units per sale, released idempotently.
type stockLedger struct {
	mu       sync.Mutex
	left     map[string]int64
	holds    map[string]string // reservation → sale
	released int
}

func newStockLedger() *stockLedger {
	l := &stockLedger{left: map[string]int64{}, holds: map[string]string{}}
	for _, s := range sales {
		l.left[s.id] = s.stock
	}
	return l
}

func (l *stockLedger) reserve(saleID, resv string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.left[saleID] == 0 {
		return false
	}
	l.left[saleID]--
	l.holds[resv] = saleID
	return true
}

// Release implements order.Releaser.
func (l *stockLedger) Release(_ context.Context, saleID, resv string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.holds[resv] == saleID {
		delete(l.holds, resv)
		l.left[saleID]++
		l.released++
	}
	return nil
}

func (l *stockLedger) releases() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.released
}

func (l *stockLedger) held(saleID string) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var n int64
	for _, s := range l.holds {
		if s == saleID {
			n++
		}
	}
	return n
}

// Kafka: a kfake cluster in process, reached over loopback TCP.

func startKafka(t *testing.T) []string {
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(3, topic))
	must(t, err)
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

func saramaConfig() *sarama.Config {
	c := orderkafka.SaramaConfig()
	c.ClientID = "shop-test"
	c.Net.DialTimeout = 500 * time.Millisecond
	c.Net.ReadTimeout = 3 * time.Second
	c.Net.WriteTimeout = 3 * time.Second
	c.Metadata.Retry.Backoff = 20 * time.Millisecond
	c.Producer.Retry.Backoff = 20 * time.Millisecond
	c.Consumer.MaxWaitTime = 50 * time.Millisecond
	c.Consumer.Offsets.AutoCommit.Interval = 50 * time.Millisecond
	c.Consumer.Group.Heartbeat.Interval = 200 * time.Millisecond
	c.Consumer.Group.Session.Timeout = 6 * time.Second // kfake's minimum
	c.Consumer.Group.Rebalance.Timeout = 3 * time.Second
	c.Consumer.Group.Rebalance.Retry.Backoff = 50 * time.Millisecond
	return c
}

type groupRun struct {
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
	g      sarama.ConsumerGroup
}

func (r *groupRun) stop() {
	r.once.Do(func() {
		r.cancel()
		<-r.done
		_ = r.g.Close()
	})
}

// runGroup runs h as a member of group until stop.
func runGroup(t *testing.T, brokers []string, group string, h sarama.ConsumerGroupHandler) *groupRun {
	g, err := sarama.NewConsumerGroup(brokers, group, saramaConfig())
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	r := &groupRun{cancel: cancel, done: make(chan struct{}), g: g}
	go func() {
		for range g.Errors() {
		}
	}()
	go func() {
		defer close(r.done)
		for ctx.Err() == nil {
			if err := g.Consume(ctx, []string{topic}, h); err != nil {
				if errors.Is(err, sarama.ErrClosedConsumerGroup) {
					return
				}
				select {
				case <-ctx.Done():
				case <-time.After(50 * time.Millisecond):
				}
			}
		}
	}()
	t.Cleanup(r.stop)
	return r
}

// Databases: a fresh one per run, dropped at the end.

func openSQLite(t *testing.T) *gorm.DB {
	dsn := "file:" + filepath.Join(t.TempDir(), "shop.db") +
		"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)"
	db, err := gorm.Open(sqlite.Open(dsn), &gorm.Config{Logger: logger.Discard})
	must(t, err)
	sqlDB, err := db.DB()
	must(t, err)
	sqlDB.SetMaxOpenConns(1) // SQLite: one writer per process
	t.Cleanup(func() { _ = sqlDB.Close() })
	return db
}

func openMySQL(t *testing.T) *gorm.DB {
	dsn := os.Getenv(envMySQL)
	if dsn == "" {
		t.Skipf("%s not set: no MariaDB/MySQL server to run on", envMySQL)
	}
	cfg, err := mysqldrv.ParseDSN(dsn)
	must(t, err)
	name := freshName(t)
	cfg.DBName = ""
	admin, err := gorm.Open(mysql.Open(cfg.FormatDSN()), &gorm.Config{Logger: logger.Discard})
	must(t, err)
	must(t, admin.Exec("CREATE DATABASE "+name).Error)
	cfg.DBName, cfg.ParseTime = name, true
	db, err := gorm.Open(mysql.Open(cfg.FormatDSN()), &gorm.Config{Logger: logger.Discard})
	must(t, err)
	t.Cleanup(func() {
		closeDB(db)
		_ = admin.Exec("DROP DATABASE IF EXISTS " + name).Error
		closeDB(admin)
	})
	return db
}

func openPostgres(t *testing.T) *gorm.DB {
	dsn := os.Getenv(envPG)
	if dsn == "" {
		t.Skipf("%s not set: no PostgreSQL server to run on", envPG)
	}
	cfg, err := pgx.ParseConfig(dsn)
	must(t, err)
	name := freshName(t)
	admin, err := gorm.Open(postgres.New(postgres.Config{Conn: stdlib.OpenDB(*cfg)}), &gorm.Config{Logger: logger.Discard})
	must(t, err)
	must(t, admin.Exec("CREATE DATABASE "+name).Error)
	cfg.Database = name
	db, err := gorm.Open(postgres.New(postgres.Config{Conn: stdlib.OpenDB(*cfg)}), &gorm.Config{Logger: logger.Discard})
	must(t, err)
	t.Cleanup(func() {
		closeDB(db)
		_ = admin.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)").Error
		closeDB(admin)
	})
	return db
}

func freshName(t *testing.T) string {
	var b [6]byte
	_, err := rand.Read(b[:])
	must(t, err)
	return "shop_t_" + hex.EncodeToString(b[:])
}

func closeDB(db *gorm.DB) {
	if sqlDB, err := db.DB(); err == nil {
		_ = sqlDB.Close()
	}
}

// Small helpers.

func newUUID(t *testing.T) string {
	var b [16]byte
	_, err := rand.Read(b[:])
	must(t, err)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func count(t *testing.T, db *gorm.DB, q string, args ...any) int64 {
	t.Helper()
	var n int64
	must(t, db.Raw(q, args...).Scan(&n).Error)
	return n
}

func eq(t *testing.T, what string, want, got int64) {
	t.Helper()
	if want != got {
		t.Errorf("%s: got %d, want %d", what, got, want)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// eventually polls cond until it holds or a minute has passed.
func eventually(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// deadLetterFunc adapts a function to order.DeadLetter.
type deadLetterFunc func(ctx context.Context, rec order.Record, cause error) error

func (f deadLetterFunc) DeadLetter(ctx context.Context, rec order.Record, cause error) error {
	return f(ctx, rec, cause)
}

// notifierFunc adapts a function to order.Notifier.
type notifierFunc func(ctx context.Context, r order.Result)

func (f notifierFunc) Notify(ctx context.Context, r order.Result) { f(ctx, r) }
