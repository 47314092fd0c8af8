// Command loadgen races N demo users for a small stock through the HTTP API
// of examples/fullstack, prints throughput, latency percentiles and outcome
// counts, waits for the order pipeline to drain, and checks the invariants
// (sold = stock, no oversell, no user twice, orders = accepted − released,
// Redis remaining + live reservations = initial). It exits 1 on any
// violation.
//
//	go run ./examples/fullstack/loadgen                       # embedded server in-process
//	go run ./examples/fullstack/loadgen -target http://127.0.0.1:8080   # a running server (-demo)
//	go run ./examples/fullstack/loadgen -redis 127.0.0.1:6379 -mysql 'root@tcp(127.0.0.1:3306)/'
//
// The embedded server accepts every service flag (see -help).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/seckillkit/seckill/examples/fullstack/app"
	"github.com/seckillkit/seckill/examples/fullstack/load"
)

func main() {
	code, err := run()
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(2)
	}
	os.Exit(code)
}

func run() (int, error) {
	cfg := app.DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.StartIn = 0
	cfg.LogLevel = "warn"
	lc := load.Config{}
	fs := flag.NewFlagSet("loadgen", flag.ExitOnError)
	cfg.RegisterFlags(fs)
	fs.StringVar(&lc.Target, "target", "", "URL of a running server started with -demo (default: start one in-process)")
	fs.IntVar(&lc.Repeat, "repeat", 1, "buy requests per user")
	fs.IntVar(&lc.Concurrency, "c", 256, "parallel connections")
	fs.DurationVar(&lc.Drain, "drain", 60*time.Second, "how long to wait for the order pipeline to settle")
	quiet := fs.Bool("q", false, "no progress bars")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the buy phase (this process: generator + embedded server) to this file")
	_ = fs.Parse(os.Args[1:])
	cfg.Resolve(fs)
	cfg.Demo = true
	lc.Users = cfg.DemoUsers
	if err := cfg.Validate(); err != nil {
		return 0, err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if lc.Target == "" {
		a, err := app.New(ctx, cfg, app.NewLogger(os.Stderr, cfg.LogLevel))
		if err != nil {
			return 0, err
		}
		url, err := a.Start()
		if err != nil {
			_ = a.Shutdown(context.Background())
			return 0, err
		}
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = a.Shutdown(sctx)
		}()
		lc.Target = url
		fmt.Printf("embedded server at %s (redis %s, db %s, kafka %s), %d users vs %d stock\n",
			url, a.Infra().RedisKind, a.Infra().DBKind, a.Infra().KafkaKind, lc.Users, cfg.Stock)
	} else {
		fmt.Printf("target %s, %d users\n", lc.Target, lc.Users)
	}
	var w io.Writer = os.Stderr
	if *quiet {
		w = nil
	}
	lc.Progress = w
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return 0, err
		}
		defer f.Close()
		lc.OnBuyPhase = func(start bool) {
			if start {
				_ = pprof.StartCPUProfile(f)
			} else {
				pprof.StopCPUProfile()
			}
		}
	}
	rep, err := load.Run(ctx, lc)
	if err != nil {
		return 0, err
	}
	fmt.Print(rep.String())
	if len(rep.Violations) > 0 {
		return 1, nil
	}
	return 0, nil
}
