// Command fullstack is the reference deployment of seckill: an HTTP service
// with a web page, every package of the library wired the way
// docs/ARCHITECTURE.md ("Request flow of a buy") describes, and its
// background workers.
//
//	go run ./examples/fullstack            # embedded: miniredis + kfake + SQLite
//	go run ./examples/fullstack -help      # every flag
//
// See README.md next to this file.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/seckillkit/seckill/examples/fullstack/app"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "fullstack:", err)
		os.Exit(1)
	}
}

func run() error {
	cfg := app.DefaultConfig()
	fs := flag.NewFlagSet("fullstack", flag.ExitOnError)
	cfg.RegisterFlags(fs)
	_ = fs.Parse(os.Args[1:])
	cfg.Resolve(fs)
	cfg.DefaultDemo(fs)
	if err := cfg.Validate(); err != nil {
		return err
	}
	log := app.NewLogger(os.Stderr, cfg.LogLevel)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	a, err := app.New(ctx, cfg, log)
	if err != nil {
		return err
	}
	if cfg.Role == app.RoleWorker {
		log.Info("worker running: order consumer, outbox relay, canceller, reconciler; no HTTP")
		<-ctx.Done()
	} else {
		url, err := a.Start()
		if err != nil {
			_ = a.Shutdown(context.Background())
			return err
		}
		fmt.Printf("\n  seckill demo running at %s (role %s)\n  sale of %d × %q starts in %v; sign in as user1 … user%d\n  Ctrl-C to stop\n\n",
			url, cfg.Role, cfg.Stock, cfg.ProductName, cfg.StartIn, cfg.DemoUsers)
		select {
		case <-ctx.Done():
		case err := <-a.Done():
			if err != nil && !errors.Is(err, context.Canceled) {
				log.Error("server stopped", "err", err)
			}
		}
	}
	stop()
	log.Info("shutting down: draining the consumer and the outbox relay")
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return a.Shutdown(sctx)
}
