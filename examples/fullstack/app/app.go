// Package app is the reference deployment of seckill: it wires every package
// of the library into one HTTP service the way docs/ARCHITECTURE.md
// ("Request flow of a buy") describes, with its background workers.
// cmd examples/fullstack runs it; the load generator and the tests start it
// in-process.
package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"log/slog"

	"github.com/seckillkit/seckill/checkout"
)

// NewLogger returns a text slog logger at level ("debug", "info", "warn",
// "error").
func NewLogger(w io.Writer, level string) *slog.Logger {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		l = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l}))
}

// App is one node of the service. It is put together in four phases (New):
//
//	connect  StartInfra, ConnectKafka: the servers, or embedded ones
//	prepare  migrate and seed the database, open the DB fallback pool
//	build    every library part, the checkout and the worker list: no I/O
//	start    each worker's start (its I/O: preload, lease, …), then its run
//
// and serves HTTP with Start. Every field below is one concern; the
// handlers read the library parts through p.
type App struct {
	cfg  Config
	log  *slog.Logger
	in   *Infra             // connections: Redis, DB, Kafka (infra.go)
	m    *metrics           // Prometheus registry of this node (metrics.go)
	hub  *hub               // push subscribers (push.go)
	sale *sale              // the activity as seeded (sale.go)
	p    *parts             // the library parts (build.go)
	co   *checkout.Checkout // the buy (build.go's buildCheckout, buy.go)
	run  *runner            // the background workers (workers.go)
	srv  *servers           // the public and admin listeners (serve.go)
}

// New puts a node together: connect (StartInfra, ConnectKafka), prepare
// (migrate and seed the database), build (every part, no I/O) and start
// (each worker's start, then its run). Call Start to serve HTTP and
// Shutdown to stop. On an error, what was opened or started is closed.
func New(ctx context.Context, cfg Config, log *slog.Logger) (_ *App, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.Demo && !cfg.Embedded() {
		log.Warn("DEMO MODE ON REAL SERVERS (-demo-with-real-servers): captcha answers are handed out and any seeded user signs in without a password; for load and fault tests only")
	}
	a := &App{cfg: cfg, log: log, m: newMetrics(), hub: newHub(), srv: newServers()}
	a.run = newRunner(ctx, log, func(name string) { a.m.workerErrors.WithLabelValues(name).Inc() })
	defer func() {
		if err != nil {
			_ = a.Shutdown(context.Background())
		}
	}()
	// connect
	if a.in, err = StartInfra(ctx, cfg, log); err != nil {
		return nil, err
	}
	if cfg.dbHook != nil { // tests: before any worker queries the DB
		if err = cfg.dbHook(a.in.DB); err != nil {
			return nil, err
		}
	}
	if cfg.redisHook != nil { // tests: before any worker calls Redis
		a.in.Redis.AddHook(cfg.redisHook)
		if a.in.StockRedis != a.in.Redis {
			a.in.StockRedis.AddHook(cfg.redisHook)
		}
	}
	node := newNodeTag()
	if err = a.in.ConnectKafka(node); err != nil {
		return nil, err
	}
	// prepare
	if a.sale, err = prepareSale(ctx, a.in.DB, cfg, log); err != nil {
		return nil, err
	}
	pool, err := openDBPool(ctx, a.in.DB, a.sale, cfg.DBFallbackQuota, log)
	if err != nil {
		return nil, err
	}
	// build
	if err = a.build(node, pool); err != nil {
		return nil, err
	}
	// start
	if err = a.run.start(ctx); err != nil {
		return nil, err
	}
	return a, nil
}

// newNodeTag is this node's random tag: in reservation IDs, request IDs and
// Kafka client IDs.
func newNodeTag() string {
	var tag [3]byte
	_, _ = rand.Read(tag[:])
	return hex.EncodeToString(tag[:])
}

// Infra returns the collaborators in use.
func (a *App) Infra() *Infra { return a.in }

// Config returns the configuration the app runs with.
func (a *App) Config() Config { return a.cfg }
