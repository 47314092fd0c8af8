package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// Request limits of the server, and per-user limits of the endpoints that
// are not the buy (whose window is Config.UserRate).
const (
	tokenRate         = 10 // access-token requests per user per minute
	captchaRate       = 20 // captchas per user per minute
	maxStreamsPerUser = 4  // concurrent SSE streams per user and instance

	defaultReadTimeout = 10 * time.Second
	maxHeaderBytes     = 16 << 10
)

// servers are a node's listeners: the public API and, when configured, the
// admin API on its own address.
type servers struct {
	readTimeout time.Duration // the ReadTimeout of both (tests shorten it)
	http        *http.Server
	ln          net.Listener
	admin       *http.Server
	adminURL    string
	done        chan error    // the public server's exit
	stopping    chan struct{} // closed when Shutdown begins (ends streams)
	stopOnce    sync.Once
}

func newServers() *servers {
	return &servers{readTimeout: defaultReadTimeout, done: make(chan error, 1), stopping: make(chan struct{})}
}

// Start listens on cfg.Addr and serves; it returns the base URL.
func (a *App) Start() (string, error) {
	ln, err := net.Listen("tcp", a.cfg.Addr)
	if err != nil {
		return "", err
	}
	a.srv.ln = ln
	a.srv.http = &http.Server{
		Handler: a.Handler(),
		// ReadTimeout bounds the whole request read, headers and body: a
		// request trickled byte by byte cannot hold a connection. It does
		// not cut the SSE stream: net/http clears the read deadline once a
		// handler runs (TestTrickledBodyIsCutOff checks both). No separate
		// ReadHeaderTimeout: with one, net/http sets the read deadline
		// twice per request, and a deadline costs a timer update (≈ 0.5 µs
		// of a buy).
		ReadTimeout:    a.srv.readTimeout,
		MaxHeaderBytes: maxHeaderBytes,
		IdleTimeout:    120 * time.Second,
		ErrorLog:       slog.NewLogLogger(a.log.Handler(), slog.LevelWarn),
	}
	go func() { a.srv.done <- a.srv.http.Serve(ln) }()
	if err := a.startAdmin(); err != nil {
		return "", err
	}
	return "http://" + ln.Addr().String(), nil
}

// startAdmin serves the admin API (admin.go) on its own listener,
// Config.AdminAddr, when Config.AdminToken is set: never on the public
// address, so the edge cannot expose it by mistake.
func (a *App) startAdmin() error {
	if a.cfg.adminAddrOld {
		a.log.Warn("SECKILL_ADMIN_LISTEN is deprecated: set SECKILL_ADMIN_ADDR (read by seckillctl too)")
	}
	if a.cfg.AdminAddr == "" {
		return nil
	}
	if a.cfg.AdminToken == "" {
		a.log.Warn("admin API off: SECKILL_ADMIN_ADDR is set but SECKILL_ADMIN_TOKEN is not")
		return nil
	}
	if a.cfg.Secret == "" {
		a.log.Warn("admin API without SECKILL_SECRET: the audit log's operator labels (and Idempotency-Key replays) change at each restart")
	}
	h, err := a.adminHandler()
	if err != nil {
		return fmt.Errorf("admin API: %w", err)
	}
	addr, err := adminListen(a.cfg.AdminAddr)
	if err != nil {
		return fmt.Errorf("admin API: SECKILL_ADMIN_ADDR: %w", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("admin API: %w", err)
	}
	a.srv.adminURL = "http://" + dialable(ln.Addr())
	a.srv.admin = &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: a.srv.readTimeout,
		MaxHeaderBytes: maxHeaderBytes, ErrorLog: slog.NewLogLogger(a.log.Handler(), slog.LevelWarn)}
	go func() { _ = a.srv.admin.Serve(ln) }()
	// The URL seckillctl takes as it is (--addr or SECKILL_ADMIN_ADDR).
	a.log.Info("admin API listening", "url", a.srv.adminURL+AdminPath)
	return nil
}

// dialable is a listener's address as a client on this host dials it: an
// unspecified address (0.0.0.0, ::) as loopback.
func dialable(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return addr.String()
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
		if ip.To4() == nil {
			host = "::1"
		}
	}
	return net.JoinHostPort(host, port)
}

// AdminURL is the admin API's scheme and host, http://host:port ("" when
// it is off); its routes are under AdminPath. The log line "admin API
// listening" gives the full base URL, AdminURL()+AdminPath.
func (a *App) AdminURL() string { return a.srv.adminURL }

// Done reports the server's exit.
func (a *App) Done() <-chan error { return a.srv.done }

// Shutdown stops taking requests, lets in-flight ones finish, waits until
// the consumer has settled every accepted reservation and the outbox is
// empty (bounded by ctx), then stops the workers and closes everything.
func (a *App) Shutdown(ctx context.Context) error {
	var errs []error
	a.srv.stopOnce.Do(func() { close(a.srv.stopping) })
	if a.srv.http != nil {
		errs = append(errs, ignoreClosed(a.srv.http.Shutdown(ctx)))
	}
	if a.srv.admin != nil {
		errs = append(errs, ignoreClosed(a.srv.admin.Shutdown(ctx)))
	}
	if a.in != nil && a.in.DB != nil && a.p != nil && a.p.built && a.cfg.works() {
		a.drain(ctx)
	}
	errs = append(errs, a.run.stop())
	if a.in != nil {
		errs = append(errs, a.in.Close())
		a.in = nil
	}
	return errors.Join(errs...)
}

// drain waits until nothing is in flight and the outbox is empty, or ctx
// ends.
func (a *App) drain(ctx context.Context) {
	for ctx.Err() == nil {
		iv, err := a.Invariants(ctx)
		if err == nil && iv.Settled {
			return
		}
		select {
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
		}
	}
}

func ignoreClosed(err error) error {
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}
