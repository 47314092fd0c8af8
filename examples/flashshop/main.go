// Command flashshop is an existing shop adding a flash sale: a plain
// net/http service with its own router, its own sign-in and its own product
// table, which mounts package checkout (through checkout/checkouthttp) for
// one product's sale. Orders go from the buy straight to the database (a
// small shop needs no broker: the consumer runs in-process), and a
// reconciler releases what a crash left held. The rest is the shop's.
//
//	go run ./examples/flashshop                      # embedded Redis, SQLite file
//	go run ./examples/flashshop -redis 127.0.0.1:6379 -mysql 'root@tcp(127.0.0.1:3306)/shop?parseTime=true'
package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"log"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/glebarez/sqlite"
	"github.com/redis/go-redis/v9"
	"gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/seckillkit/seckill/checkout"
	"github.com/seckillkit/seckill/checkout/checkouthttp"
	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/order/handoff"
	"github.com/seckillkit/seckill/order/orderid"
	"github.com/seckillkit/seckill/order/reconcile"
	"github.com/seckillkit/seckill/order/status"
	"github.com/seckillkit/seckill/stock"
)

// Product is the shop's own table; FlashStock units of it go on sale.
type Product struct {
	ID         string `gorm:"primaryKey;size:64"`
	Name       string
	PriceCents int64
	FlashStock int64
	Limit      int64 // per buyer in the sale; 0 means 1
}

// Shop is the service: its data, its sale, its routes.
type Shop struct {
	db     *gorm.DB
	secret []byte
	Sale   *checkout.Checkout
	Recon  *reconcile.Reconciler
	Stock  *stock.Deductor
	http   *checkouthttp.Handler
}

// Open builds the shop over rdb and db and puts p on sale; a restart finds
// the rows and the sale it made before.
// steps, when set, edits the checkout's steps (the conformance kit's).
func Open(ctx context.Context, rdb redis.UniversalClient, db *gorm.DB, p Product, secret []byte, grace time.Duration,
	steps func([]checkout.Step) []checkout.Step) (*Shop, error) {
	now, limit := time.Now(), max(p.Limit, 1)
	act := order.Activity{ID: p.ID, Name: p.Name, ActivityPrice: order.Cents(p.PriceCents), Stock: p.FlashStock, Remaining: p.FlashStock,
		PerUserLimit: limit, Status: order.ActivityActive, Start: now.Add(-time.Minute), End: now.Add(24 * time.Hour)}
	err := errors.Join(db.AutoMigrate(&Product{}), order.AutoMigrate(ctx, db))
	if err = errors.Join(err, db.Where(Product{ID: p.ID}).FirstOrCreate(&p).Error, db.Where(order.Activity{ID: p.ID}).FirstOrCreate(&act).Error); err != nil {
		return nil, err
	}
	d, err := stock.New(rdb)
	if err == nil {
		_, err = d.Load(ctx, stock.Activity{ID: p.ID, Stock: act.Stock, PerUserLimit: limit, Start: act.Start, End: act.End})
	}
	ids, err2 := orderid.New(1)
	results, err3 := status.NewResults(rdb, db)
	if err = errors.Join(err, err2, err3); err != nil {
		return nil, err
	}
	s := &Shop{db: db, secret: secret, Stock: d}
	release := checkout.Releaser(d)
	proc, err := order.NewProcessor(db, ids)
	fence, err2 := handoff.NewFence(db, release, handoff.WithResults(results))
	consumer, err3 := order.NewConsumer(proc, release, order.WithResults(results))
	var offset atomic.Int64 // the in-process consumer's partition
	publish := handoff.Publisher(func(ctx context.Context, m order.Message) error {
		b, err := m.Encode()
		if err == nil {
			_, err = consumer.Consume(ctx, []order.Record{{Topic: "orders", Offset: offset.Add(1), Key: []byte(m.Key()), Value: b}})
		}
		return err
	})
	noFallback := handoff.Fallback(func(context.Context, order.Message) error { return handoff.ErrRetry })
	submitter, err4 := handoff.NewSubmitter(publish, noFallback, fence, handoff.WithResults(results))
	recon, err5 := reconcile.NewReconciler(db, checkout.Ledger(d), release, reconcile.WithGrace(grace), reconcile.WithResults(results))
	if s.Recon, err = recon, errors.Join(err, err2, err3, err4, err5); err != nil {
		return nil, err
	}
	if s.Sale, err = checkout.New(checkout.Config{Activity: p.ID, Price: p.PriceCents, Stock: d, Submitter: submitter,
		Results: results.Reservation, Fence: fence.ReleaseFor, Steps: steps}); err != nil {
		return nil, err
	}
	s.http, err = checkouthttp.New(s.Sale, s.user)
	return s, err
}

// Routes is the shop's own router with the sale mounted on it.
func (s *Shop) Routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /products", func(w http.ResponseWriter, r *http.Request) {
		var ps []Product
		if err := s.db.WithContext(r.Context()).Find(&ps).Error; err != nil {
			http.Error(w, "unavailable", http.StatusServiceUnavailable)
			return
		}
		_ = json.NewEncoder(w).Encode(ps)
	})
	mux.HandleFunc("POST /login", func(w http.ResponseWriter, r *http.Request) { // the shop's own (demo) sign-in
		if name := r.FormValue("name"); stock.ValidID(name) {
			http.SetCookie(w, &http.Cookie{Name: "session", Value: name + "." + s.mac(name), HttpOnly: true, Path: "/"})
			return
		}
		http.Error(w, "bad name", http.StatusBadRequest)
	})
	mux.HandleFunc("POST /flash/buy", s.http.Buy)
	mux.HandleFunc("GET /flash/result/{reservation}", s.http.Result)
	mux.HandleFunc("GET /flash/events/{reservation}", s.http.Stream)
	return mux
}

func (s *Shop) mac(name string) string {
	m := hmac.New(sha256.New, s.secret)
	m.Write([]byte(name))
	return hex.EncodeToString(m.Sum(nil))
}

// user is the signed-in buyer of r, from the shop's session cookie.
func (s *Shop) user(r *http.Request) (string, bool) {
	c, err := r.Cookie("session")
	if err != nil {
		return "", false
	}
	name, sig, ok := strings.Cut(c.Value, ".")
	return name, ok && hmac.Equal([]byte(sig), []byte(s.mac(name)))
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8090", "listen address")
	redisAddr := flag.String("redis", "", "Redis host:port (default: an embedded miniredis)")
	dsn := flag.String("mysql", "", "MySQL/MariaDB DSN (default: the SQLite file flashshop.db)")
	units := flag.Int64("stock", 100, "units of the product on sale")
	product := flag.String("product", "sneaker-1", "the product on sale (its ID names its keys and rows)")
	grace := flag.Duration("grace", 30*time.Second, "how long a reservation waits for its order before the reconciler releases it")
	flag.Parse()
	if *redisAddr == "" {
		mr := miniredis.NewMiniRedis()
		if err := mr.StartAddr("127.0.0.1:0"); err != nil {
			log.Fatal(err)
		}
		*redisAddr = mr.Addr()
	}
	dial := sqlite.Open("flashshop.db?_pragma=busy_timeout(5000)")
	if *dsn != "" {
		dial = mysql.Open(*dsn)
	}
	db, err := gorm.Open(dial, &gorm.Config{Logger: logger.Default.LogMode(logger.Silent)})
	if err != nil {
		log.Fatal(err)
	}
	p := Product{ID: *product, Name: "Sneaker, limited", PriceCents: 9900, FlashStock: *units}
	shop, err := Open(context.Background(), redis.NewClient(&redis.Options{Addr: *redisAddr}), db, p, []byte("flashshop-demo-secret"), *grace, nil)
	if err != nil {
		log.Fatal(err)
	}
	go func() { // the reconciler: releases what a crash left held, past the grace
		for range time.Tick(*grace / 4) {
			if _, err := shop.Recon.Reconcile(context.Background(), p.ID); err != nil {
				log.Printf("reconcile: %v", err)
			}
		}
	}()
	log.Printf("flashshop listening on http://%s", *addr)
	log.Fatal(http.ListenAndServe(*addr, shop.Routes()))
}
