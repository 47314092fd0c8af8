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
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"
	"gorm.io/gorm"

	"github.com/seckillkit/seckill/breaker"
	"github.com/seckillkit/seckill/limiter"
	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/outbox"
	"github.com/seckillkit/seckill/risk"
	"github.com/seckillkit/seckill/stock"
	"github.com/seckillkit/seckill/stock/dbfallback"
	"github.com/seckillkit/seckill/token"
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

// App is one node of the service.
type App struct {
	// readTimeout is the server's ReadTimeout (defaultReadTimeout; tests
	// shorten it before Start).
	readTimeout time.Duration

	cfg     Config
	log     *slog.Logger
	in      *Infra
	m       *metrics
	hub     *hub
	nodeTag string
	actKey  string // activity ID as the string keyed packages take

	// Sale.
	act      order.Activity // the DB row as seeded
	pathOpen time.Time

	// Library parts.
	stock     *stock.Deductor
	fallback  *dbfallback.Store // nil unless -db-fallback-quota > 0
	poolOut   atomic.Int64      // unix nanos until which the DB pool is known sold out
	preloader *stock.Preloader
	pool      *token.Pool
	signer    *token.Signer
	sessions  *risk.SessionStore
	authn     *risk.AuthCache
	auth      *risk.Auth
	ips       *risk.IPResolver
	checker   *risk.Checker
	blacklist *risk.Blacklist
	global    *limiter.TokenBucket
	perUser   limiter.Limiter
	// tokenLimit and captchaLimit: per-user windows of the credential
	// endpoints (tokenRate, captchaRate a minute).
	tokenLimit   limiter.Limiter
	captchaLimit limiter.Limiter

	// recon and reconDry: the reconciler and its dry-run twin (admin API).
	recon, reconDry *order.Reconciler
	admin           *http.Server // the admin API's own listener (Config.AdminAddr)
	adminURL        string

	// obs is the one observer every library part reports to: the
	// service's Prometheus observer, plus Config.Observer.
	obs multiObserver

	streams   streamCap // concurrent SSE streams per user
	ticketKey []byte    // HMAC key of SSE tickets (ticket.go)

	brRedis  *breaker.Breaker
	brKafka  *breaker.Breaker
	results  *order.Results
	outboxW  *outbox.Writer
	relay    *outbox.Relay
	producer sarama.SyncProducer
	kadmin   sarama.ClusterAdmin // consumer lag (orderkafka.Lag)
	kclient  sarama.Client
	parts    parts // packages wired in wire.go

	// Read-path cache of the remaining stock (the page polls it).
	remaining atomic.Int64
	remainAt  atomic.Int64 // unix nanos of the last refresh

	// Lifecycle.
	srv      *http.Server
	ln       net.Listener
	done     chan error
	stopping chan struct{}
	stopOnce sync.Once
	bg       context.Context
	bgCancel context.CancelFunc
	wg       sync.WaitGroup
	closers  []func() error
	accepted atomic.Int64 // reservations handed to the pipeline by this node
}

// New starts the infrastructure (or connects to it), migrates and seeds the
// database, loads the sale and starts the background workers. Call Start to
// serve HTTP and Shutdown to stop.
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
	var tag [3]byte
	_, _ = rand.Read(tag[:])
	a := &App{
		cfg: cfg, log: log, m: newMetrics(), hub: newHub(), readTimeout: defaultReadTimeout,
		nodeTag:  hex.EncodeToString(tag[:]),
		actKey:   strconv.FormatInt(cfg.ActivityID, 10),
		done:     make(chan error, 1),
		stopping: make(chan struct{}),
	}
	a.obs = multiObserver{a.m.obs}
	if cfg.Observer != nil {
		a.obs = append(a.obs, cfg.Observer)
	}
	a.bg, a.bgCancel = context.WithCancel(context.WithoutCancel(ctx))
	defer func() {
		if err != nil {
			_ = a.Shutdown(context.Background())
		}
	}()
	if a.in, err = StartInfra(ctx, cfg, log); err != nil {
		return nil, err
	}
	if cfg.dbHook != nil { // tests: before any worker queries the DB
		if err = cfg.dbHook(a.in.DB); err != nil {
			return nil, err
		}
	}
	if err = a.migrateAndSeed(ctx); err != nil {
		return nil, err
	}
	if err = a.wire(ctx); err != nil {
		return nil, err
	}
	a.startWorkers()
	return a, nil
}

// Infra returns the collaborators in use.
func (a *App) Infra() *Infra { return a.in }

// Config returns the configuration the app runs with.
func (a *App) Config() Config { return a.cfg }

// Request limits of the server, and per-user limits of the endpoints that
// are not the buy (whose window is Config.UserRate).
const (
	tokenRate         = 10 // access-token requests per user per minute
	captchaRate       = 20 // captchas per user per minute
	maxStreamsPerUser = 4  // concurrent SSE streams per user and instance

	defaultReadTimeout = 10 * time.Second
	maxHeaderBytes     = 16 << 10
)

// Start listens on cfg.Addr and serves; it returns the base URL.
func (a *App) Start() (string, error) {
	ln, err := net.Listen("tcp", a.cfg.Addr)
	if err != nil {
		return "", err
	}
	a.ln = ln
	a.srv = &http.Server{
		Handler:           a.Handler(),
		ReadHeaderTimeout: 5 * time.Second,
		// ReadTimeout bounds the whole request read, body included: a body
		// trickled byte by byte cannot hold a connection. It does not cut
		// the SSE stream: net/http clears the read deadline once a handler
		// runs (TestTrickledBodyIsCutOff checks both).
		ReadTimeout:    a.readTimeout,
		MaxHeaderBytes: maxHeaderBytes,
		IdleTimeout:    120 * time.Second,
		ErrorLog:       slog.NewLogLogger(a.log.Handler(), slog.LevelWarn),
	}
	go func() { a.done <- a.srv.Serve(ln) }()
	if err := a.startAdmin(); err != nil {
		return "", err
	}
	return "http://" + ln.Addr().String(), nil
}

// startAdmin serves the admin API (admin.go) on its own listener,
// Config.AdminAddr, when Config.AdminToken is set: never on the public
// address, so the edge cannot expose it by mistake.
func (a *App) startAdmin() error {
	if a.cfg.AdminAddr == "" || a.cfg.AdminToken == "" {
		return nil
	}
	h, err := a.adminHandler()
	if err != nil {
		return fmt.Errorf("admin API: %w", err)
	}
	ln, err := net.Listen("tcp", a.cfg.AdminAddr)
	if err != nil {
		return fmt.Errorf("admin API: %w", err)
	}
	a.adminURL = "http://" + ln.Addr().String()
	a.admin = &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: a.readTimeout,
		MaxHeaderBytes: maxHeaderBytes, ErrorLog: slog.NewLogLogger(a.log.Handler(), slog.LevelWarn)}
	go func() { _ = a.admin.Serve(ln) }()
	a.log.Info("admin API listening", "url", a.adminURL)
	return nil
}

// AdminURL is the admin API's base URL ("" when it is off).
func (a *App) AdminURL() string { return a.adminURL }

// Done reports the server's exit.
func (a *App) Done() <-chan error { return a.done }

// Shutdown stops taking requests, lets in-flight ones finish, waits until
// the consumer has settled every accepted reservation and the outbox is
// empty (bounded by ctx), then stops the workers and closes everything.
func (a *App) Shutdown(ctx context.Context) error {
	var errs []error
	a.stopOnce.Do(func() { close(a.stopping) })
	if a.srv != nil {
		errs = append(errs, ignoreClosed(a.srv.Shutdown(ctx)))
	}
	if a.admin != nil {
		errs = append(errs, ignoreClosed(a.admin.Shutdown(ctx)))
	}
	if a.in != nil && a.in.DB != nil && a.parts.ready() && a.cfg.works() {
		// Drain: nothing in flight and the outbox empty.
		for ctx.Err() == nil {
			iv, err := a.Invariants(ctx)
			if err == nil && iv.Settled {
				break
			}
			select {
			case <-time.After(50 * time.Millisecond):
			case <-ctx.Done():
			}
		}
	}
	if a.bgCancel != nil {
		a.bgCancel()
	}
	for i := len(a.closers) - 1; i >= 0; i-- {
		errs = append(errs, a.closers[i]())
	}
	a.closers = nil
	a.wg.Wait()
	if a.in != nil {
		errs = append(errs, a.in.Close())
		a.in = nil
	}
	return errors.Join(errs...)
}

func ignoreClosed(err error) error {
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// goWorker runs fn until the app stops; errors are logged and counted.
func (a *App) goWorker(name string, fn func(ctx context.Context) error) {
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		err := fn(a.bg)
		if err != nil && !errors.Is(err, context.Canceled) && a.bg.Err() == nil {
			a.m.workerErrors.WithLabelValues(name).Inc()
			a.log.Error("worker stopped", "worker", name, "err", err)
		}
	}()
}

// migrateAndSeed creates the tables and the demo activity row (kept if it
// exists: a second instance or a restart joins the running sale).
func (a *App) migrateAndSeed(ctx context.Context) error {
	db := a.in.DB.WithContext(ctx)
	if err := order.AutoMigrate(ctx, a.in.DB); err != nil {
		return fmt.Errorf("migrate order tables: %w", err)
	}
	if err := outbox.AutoMigrate(ctx, a.in.DB); err != nil {
		return fmt.Errorf("migrate outbox: %w", err)
	}
	price, err := parseCents(a.cfg.Price)
	if err != nil {
		return fmt.Errorf("price: %w", err)
	}
	orig, err := parseCents(a.cfg.Original)
	if err != nil {
		return fmt.Errorf("original price: %w", err)
	}
	now := time.Now().UTC().Truncate(time.Second)
	act := order.Activity{
		ID: a.actKey, Name: "Flash sale #" + a.actKey, ProductID: 1000 + a.cfg.ActivityID,
		ProductName: a.cfg.ProductName, OriginalPrice: orig, ActivityPrice: price,
		TotalStock: a.cfg.Stock, Stock: a.cfg.Stock, UserLimit: 1, Status: 1,
		StartTime: now.Add(a.cfg.StartIn), EndTime: now.Add(a.cfg.StartIn + a.cfg.Duration),
	}
	var existing order.Activity
	err = db.Where("id = ?", act.ID).Take(&existing).Error
	switch {
	case err == nil:
		a.act = existing
		a.log.Info("joining the existing activity", "activity", existing.ID, "start", existing.StartTime, "stock", existing.Stock)
	case errors.Is(err, gorm.ErrRecordNotFound):
		if err := db.Create(&act).Error; err != nil {
			return fmt.Errorf("seed activity: %w", err)
		}
		a.act = act
	default:
		return fmt.Errorf("read activity: %w", err)
	}
	a.act.StartTime, a.act.EndTime = a.act.StartTime.UTC(), a.act.EndTime.UTC()
	a.pathOpen = a.act.StartTime.Add(-a.cfg.PathLead)
	return nil
}

func parseCents(s string) (order.Cents, error) {
	whole, frac, _ := strings.Cut(strings.TrimSpace(s), ".")
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || w < 0 || len(frac) > 2 {
		return 0, fmt.Errorf("bad amount %q", s)
	}
	for len(frac) < 2 {
		frac += "0"
	}
	f, err := strconv.ParseInt(frac, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("bad amount %q", s)
	}
	return order.Cents(w*100 + f), nil
}

// multiObserver tells every observer of the list about each event.
type multiObserver []stock.Observer

// Observe implements the one observer interface (stock.Observer is
// limiter.Observer, order.Observer, …).
func (m multiObserver) Observe(ctx context.Context, e stock.Event) {
	for _, o := range m {
		o.Observe(ctx, e)
	}
}
