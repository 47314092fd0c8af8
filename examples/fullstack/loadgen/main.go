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
//	go run ./examples/fullstack/loadgen -report load.html             # also the run as an HTML page
//	go run ./examples/fullstack/loadgen -peak -users 20000            # the peak: stock for half the users
//	go run ./examples/fullstack/loadgen -pay-share 0.5 -refund-share 0.5 # pay half the orders, refund half of those
//	go run ./examples/fullstack/loadgen -variants 36=50,37=120,38=200 -variant-weights 36=6,37=3,38=1 # a sale in sizes
//
// -peak measures the moment that decides a sale: the stock is half the
// users (unless -stock or SECKILL_STOCK says otherwise), so half the buys
// are accepted while stock remains and half refused once it is gone; the
// bare server is measured beside the buy phase (-baseline), and the
// figures are printed side by side (rate, p50, p99, CPU per request, the
// ratios), with the Redis commands per accepted buy read from the
// service's Redis (INFO commandstats and INFO cpu before and after the buy
// phase; -redis, -stock-redis or -redis-cluster name it, also with
// -target; "n/a" on the embedded miniredis, which has no INFO
// commandstats).
//
// -report writes one self-contained HTML file (inline SVG, no script, no
// network): throughput by outcome and latency p50/p90/p99 over time, with
// the buy phase's start and end as vertical lines, answers by stage, the
// invariant check, and the run's parameters and figures.
//
// -variants ID=STOCK,... (a service flag) sells the sale in sizes: each
// buyer picks one by -variant-weights (else a Zipf law, -variant-zipf,
// over the sizes in the sale's order), the invariants are checked per
// size and over the sale (load.CheckVariants: no oversell, the per-user
// cap per size and over the sale in Redis and the DB, conservation,
// nothing accepted lost, no duplicate order), and the reports gain a
// table of the sizes (initial, sold, left, when it sold out, the answers
// by reason).
//
// The embedded server accepts every service flag (see -help).
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/seckillkit/seckill/examples/fullstack/app"
	"github.com/seckillkit/seckill/examples/fullstack/load"
	"github.com/seckillkit/seckill/order/status"
)

func main() {
	code, err := run(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(2)
	}
	os.Exit(code)
}

// run is loadgen with its arguments: it reads the flags, starts the
// embedded server (or names the target), measures the bare baseline when
// asked, runs the load and prints the report. The code is 1 when an
// invariant is violated.
func run(args []string) (int, error) {
	cl := parseFlags(args)
	if cl.bareServe != "" {
		return serveBare(cl.bareServe)
	}
	cl.cfg.Resolve(cl.fs)
	cfg, lc := cl.cfg, cl.lc
	// The load generator reads captcha answers through the demo hook, so
	// its in-process server always runs in demo mode, on real servers too:
	// it is a test tool, never a deployment.
	cfg.Demo, cfg.DemoWithRealServers = true, true
	lc.Users = cfg.DemoUsers
	botFarmServer(cl, &cfg)
	if err := cfg.Validate(); err != nil {
		return 0, err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if cfg.SaleMode == app.SaleQueue || cfg.SaleMode == app.SaleDraw { // fair.go
		return runFair(ctx, cfg, lc.Target, lc.Concurrency, lc.Drain, cl.report)
	}
	lc.MetricsToken = os.Getenv("SECKILL_METRICS_TOKEN") // the target's, to read its CPU
	if lc.Peak {
		read, note, closeRedis := newRedisReader(cfg, lc.Target == "")
		defer closeRedis()
		lc.Redis, lc.RedisNote = read, note
	}
	if lc.Target == "" {
		shutdown, err := startEmbedded(ctx, cfg, &lc)
		if err != nil {
			return 0, err
		}
		defer shutdown()
	} else {
		fmt.Printf("target %s, %d users\n", lc.Target, lc.Users)
	}
	if cl.botfarm > 0 {
		return runBotFarm(ctx, cl.botfarm, lc)
	}
	if !cl.quiet {
		lc.Progress = os.Stderr
	}
	if cl.cpuprofile != "" {
		closeProfile, err := profileBuyPhase(cl.cpuprofile, &lc)
		if err != nil {
			return 0, err
		}
		defer closeProfile()
	}
	var base *baseline
	if cl.baseline {
		b, err := newBaseline(ctx, lc)
		if err != nil {
			return 0, err
		}
		defer b.stop()
		lc.Beside, base = b.measure, b
	}
	rep, err := load.Run(ctx, lc)
	if err != nil {
		return 0, err
	}
	if base != nil {
		rep.BareBefore, rep.BareAfter = base.before, base.after
	}
	return output(rep, cl.report)
}

// cmdline is loadgen's parsed command line: the embedded server's flags
// (every service flag), the load's and loadgen's own.
type cmdline struct {
	fs         *flag.FlagSet
	cfg        app.Config  // the embedded server
	lc         load.Config // the load
	quiet      bool        // -q
	bareServe  string      // -bare-serve
	baseline   bool        // -baseline
	peak       bool        // -peak
	cpuprofile string      // -cpuprofile
	report     string      // -report
	botfarm    int         // -botfarm (botfarm.go)
}

// parseFlags registers and parses the flags; bad flags exit (status 2)
// with the usage.
func parseFlags(args []string) *cmdline {
	cl := &cmdline{cfg: app.DefaultConfig(), fs: flag.NewFlagSet("loadgen", flag.ExitOnError)}
	cl.cfg.Addr = "127.0.0.1:0"
	cl.cfg.StartIn = 0
	cl.cfg.LogLevel = "warn"
	fs := cl.fs
	cl.cfg.RegisterFlags(fs)
	fs.StringVar(&cl.lc.Target, "target", "", "URL of a running server started with -demo (default: start one in-process)")
	fs.IntVar(&cl.lc.Repeat, "repeat", 1, "buy requests per user")
	fs.IntVar(&cl.lc.Concurrency, "c", 256, "parallel connections")
	fs.DurationVar(&cl.lc.Drain, "drain", 60*time.Second, "how long to wait for the order pipeline to settle")
	fs.BoolVar(&cl.quiet, "q", false, "no progress bars")
	fs.Float64Var(&cl.lc.PayShare, "pay-share", 1.0/3, "share of the orders paid after the drain (0..1), half through the fake provider's signed callback, half by POST /api/pay")
	fs.Float64Var(&cl.lc.RefundShare, "refund-share", 0, "share of the paid orders refunded (0..1), restocked to the sale, not at all and to the shop in turn (the in-process server only)")
	fs.StringVar(&cl.bareServe, "bare-serve", "", "internal: serve the bare baseline server on this address and print its URL (used by -baseline with -target)")
	fs.BoolVar(&cl.baseline, "baseline", false, "also measure a bare net/http server (the machine's floor) with the same generator and concurrency, half the buy phase's request count right before it and half right after, and print the service's ratio to it")
	fs.StringVar(&cl.cpuprofile, "cpuprofile", "", "write a CPU profile of the buy phase (this process: generator + embedded server) to this file")
	fs.StringVar(&cl.report, "report", "", "also write the run as one self-contained HTML page (throughput and latency over time, answers by stage, invariants) to this file")
	fs.BoolVar(&cl.peak, "peak", false, "measure the peak of a sale: stock = users / 2 unless -stock (or SECKILL_STOCK) is given, the bare server beside the buy phase (as -baseline), the figures side by side, and the Redis commands and CPU per accepted buy (INFO commandstats of -redis, -stock-redis or -redis-cluster; with -target they name the target's Redis)")
	fs.IntVar(&cl.botfarm, "botfarm", 0, "bot-farm mode (#29): the last N of -users are scripted bots (no delay, rotating devices and addresses in one IPv6 /64, solving the proof of work) beside human-paced clients; prints who got the stock and the humans' latency (the embedded server trusts 127.0.0.1's X-Forwarded-For)")
	fs.Func("variant-weights", "with a sale sold in variants (-variants): each buyer picks a size by these weights, ID=WEIGHT comma separated, e.g. 36=6,37=3,38=1 (sizes not named: 0); default: Zipf over the sizes in the sale's order (-variant-zipf)",
		func(s string) error { w, err := load.ParseVariantWeights(s); cl.lc.VariantWeights = w; return err })
	fs.Float64Var(&cl.lc.VariantZipf, "variant-zipf", 1, "with variants and no -variant-weights: the exponent s of the Zipf law of the buyers' sizes (weight of the k-th size listed ∝ 1/k^s: the first is the most wanted)")
	fs.Uint64Var(&cl.lc.Seed, "seed", 0, "seed of the buyers' choice of sizes (0: random)")
	_ = fs.Parse(args)
	if cl.lc.PayShare == 0 { // -pay-share 0: none (load.Config's 0 is its default)
		cl.lc.PayShare = -1
	}
	cl.applyPeak()
	return cl
}

// applyPeak sets -peak's defaults: half the users' worth of stock unless
// the stock was given, and the bare server beside the buy phase.
func (cl *cmdline) applyPeak() {
	if !cl.peak {
		return
	}
	cl.baseline, cl.lc.Peak = true, true
	given := os.Getenv("SECKILL_STOCK") != ""
	cl.fs.Visit(func(f *flag.Flag) { given = given || f.Name == "stock" })
	if !given {
		cl.cfg.Stock = int64(max(cl.cfg.DemoUsers/2, 1))
	}
}

// startEmbedded starts the service in this process, makes it lc's target
// and returns its shutdown.
func startEmbedded(ctx context.Context, cfg app.Config, lc *load.Config) (func(), error) {
	a, err := app.New(ctx, cfg, app.NewLogger(os.Stderr, cfg.LogLevel))
	if err != nil {
		return nil, err
	}
	url, err := a.Start()
	if err != nil {
		_ = a.Shutdown(context.Background())
		return nil, err
	}
	lc.Target = url
	lc.SameProcess = true
	lc.Refund = func(ctx context.Context, orderNo, restock string) error {
		return a.Refund(ctx, orderNo, status.Restock(restock))
	}
	if db := a.Infra().DB; db != nil {
		lc.Truth = newTruth(db) // the buyers' histories are checked against SQL
	}
	fmt.Printf("embedded server at %s (redis %s, db %s, kafka %s), %d users vs %d stock\n",
		url, a.Infra().RedisKind, a.Infra().DBKind, a.Infra().KafkaKind, lc.Users, cfg.Stock)
	return func() {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = a.Shutdown(sctx)
	}, nil
}

// profileBuyPhase makes lc write a CPU profile of its buy phase to path
// and returns the file's close.
func profileBuyPhase(path string, lc *load.Config) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	lc.OnBuyPhase = func(start bool) {
		if start {
			_ = pprof.StartCPUProfile(f)
		} else {
			pprof.StopCPUProfile()
		}
	}
	return func() {
		pprof.StopCPUProfile() // a buy phase that failed never stopped it
		_ = f.Close()
	}, nil
}

// baseline measures the bare net/http server beside the buy phase: half
// the buy phase's request count right before it and half right after
// (load.Config.Beside), with the same generator and connections, so the
// service and the floor it is compared with share the machine's
// conditions. Measured first, a minute before the buy phase (preparing the
// attempts lies between), the bare server alone moved 21k–80k req/s on a
// shared machine and the ratio recorded the neighbours more than the
// service.
type baseline struct {
	lc            load.Config // the bare server's: lc's generator settings, half the requests
	stop          func()      // ends the bare server's process, if any
	before, after *load.Report
}

// newBaseline readies the baseline beside lc's buy phase: in this process
// when the service runs here, else against a bare server in a child
// process, which stop ends.
func newBaseline(ctx context.Context, lc load.Config) (*baseline, error) {
	bc := lc
	bc.Target, bc.Progress, bc.Beside, bc.OnBuyPhase, bc.OnReport, bc.Steps = "", nil, nil, nil, nil, nil
	bc.Users, bc.Repeat = max(1, lc.Users*max(lc.Repeat, 1)/2), 1
	b := &baseline{lc: bc, stop: func() {}}
	if !lc.SameProcess {
		// The service runs in another process: so does the bare server.
		url, stop, err := startBare(ctx)
		if err != nil {
			return nil, err
		}
		b.lc.Target, b.stop = url, stop
	}
	return b, nil
}

// measure is the buy phase's Beside: one half of the baseline.
func (b *baseline) measure(ctx context.Context, before bool) error {
	r, err := load.Baseline(ctx, b.lc)
	if err != nil {
		return err
	}
	if before {
		b.before = r
	} else {
		b.after = r
	}
	return nil
}

// output prints the report (with the bare server's and the ratios when
// measured, the peak's figures with -peak), writes the HTML report when
// asked, and gives the exit code: 1 when an invariant is violated.
func output(rep *load.Report, report string) (int, error) {
	fmt.Print(rep.String())
	if rep.BareBefore != nil && rep.BareAfter != nil {
		fmt.Print(rep.BareBefore.BaselineString("right before the buy phase"))
		fmt.Print(rep.BareAfter.BaselineString("right after the buy phase"))
		tp, cpu := rep.Ratios()
		fmt.Printf("ratio       the service's buy phase ran at %.0f%% of the bare server's rate (both halves)\n", 100*tp)
		if cpu > 0 {
			fmt.Printf("cpu ratio   %.2f: (bare server + generator CPU per request) / (service + generator CPU per buy)\n", cpu)
		}
	}
	if rep.Config.Peak {
		fmt.Print(rep.PeakString())
	}
	if report != "" {
		if err := writeReport(report, rep); err != nil {
			return 0, err
		}
		fmt.Printf("report      %s\n", report)
	}
	if len(rep.Violations) > 0 {
		return 1, nil
	}
	return 0, nil
}

// writeReport writes rep's HTML report to path.
func writeReport(path string, rep *load.Report) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	if err := rep.WriteHTML(w); err != nil {
		_ = f.Close()
		return fmt.Errorf("report %s: %w", path, err)
	}
	if err := w.Flush(); err != nil {
		_ = f.Close()
		return fmt.Errorf("report %s: %w", path, err)
	}
	return f.Close()
}

// serveBare runs the bare baseline server (the child side of -baseline with
// -target) until stdin closes or a signal arrives.
func serveBare(addr string) (int, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return 0, err
	}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: load.BareHandler()}
	go func() { _ = srv.Serve(ln) }()
	fmt.Printf("http://%s\n", ln.Addr())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); stop() }() // the parent went away
	<-ctx.Done()
	return 0, srv.Close()
}

// startBare starts this program as a bare baseline server in a child
// process and returns its URL.
func startBare(ctx context.Context) (string, func(), error) {
	self, err := os.Executable()
	if err != nil {
		return "", nil, err
	}
	cmd := exec.CommandContext(ctx, self, "-bare-serve", "127.0.0.1:0")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return "", nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop := func() { _ = stdin.Close(); _ = cmd.Wait() }
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		stop()
		return "", nil, fmt.Errorf("bare server: %w", err)
	}
	return strings.TrimSpace(line), stop, nil
}
