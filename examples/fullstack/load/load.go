// Package load is the load generator of examples/fullstack: N demo users
// race for a small stock through the service's real HTTP API, then the
// generator waits for the order pipeline to drain and checks the invariants
// the server reads from its database and Redis.
//
// Every buyer's history is checked too, not only the end state: each
// attempt records its answers (the buy, result polls during and after the
// drain, SSE pushes, the payment, reads of another buyer's reservation)
// and package history checks them against the model of a buy and, given
// Config.Truth, SQL (Report.History; see histories.go).
//
// It needs a server started with -demo: the demo-only captcha hook lets the
// generator pass the captcha, and /api/demo/invariants reports the counts.
//
// # The run as pictures
//
// Besides the totals, Run keeps every buy request as a Sample (when it was
// sent, its latency, its outcome and the stage of the buy chain that
// answered: the body's "stage" when the service sends one, else StageOf of
// the status: sold_out → stock, limited → limiter, token → access_token,
// busy/retry → availability, ...) and named Events ("buy start", "buy end",
// "drain end", and whatever a caller marks with Report.Mark during the run;
// Config.OnReport hands the report over before the buy phase).
//
// Buckets cuts the samples into fixed slices of time by the instant each
// answer arrived; BucketWidth picks the width (1-2-5 steps, at most
// MaxBuckets slices: 10 ms for a 1 s buy phase, 100 ms for 10 s). Each
// bucket has the answers per outcome and the nearest-rank p50/p90/p99 of
// their latency (Percentile; the run's own P50/P99/P999 use the same rule).
//
// Report.WriteHTML renders one self-contained page, readable offline and
// with no script: stacked throughput by outcome and the latency percentiles
// over time as inline SVG, with the events as dashed vertical lines; the
// answers by stage (bars and table); the invariant check (OK or each
// violation); the run's parameters and summary figures. loadgen -report
// FILE writes it.
package load

import (
	"cmp"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/valyala/fasthttp"

	"github.com/seckillkit/seckill/examples/fullstack/history"
)

// Config of one run.
type Config struct {
	Target string // base URL of the service, e.g. http://127.0.0.1:8080
	// MetricsToken is the service's metrics token (SECKILL_METRICS_TOKEN),
	// sent as a bearer token to read its CPU from /metrics; empty: none
	// (a demo server serves /metrics openly).
	MetricsToken string
	Users        int              // demo users taking part (user1..userN); default 10,000
	FirstUser    int              // number of the first user; default 1
	Repeat       int              // buy requests per user (repeats are refused as limited/already bought); default 1
	Concurrency  int              // parallel HTTP connections; default 256
	Drain        time.Duration    // how long to wait for the pipeline to settle; default 60s
	SameProcess  bool             // the server runs in this process (CPU is reported once)
	Progress     io.Writer        // progress bars go here; nil = none
	OnBuyPhase   func(start bool) // called when the buy phase starts and ends (profiling); may be nil
	// Beside, when set, runs right before the buy phase (before = true)
	// and right after it (false), outside its timing and CPU figures: a
	// measurement that must share the buy phase's conditions on a noisy
	// machine goes there (loadgen -baseline measures the bare server in
	// two halves). An error aborts the run.
	Beside func(ctx context.Context, before bool) error
	// OnReport, when set, gets the report as soon as Run makes it, before
	// the buy phase: a caller that acts on the service during the run (a
	// pause, a stock top-up) calls Report.Mark from any goroutine so the
	// HTML report shows the instant.
	OnReport func(*Report)
	// Redis, when set, reads the service's Redis servers (RedisReading:
	// INFO commandstats and cpu, summed over them); Run reads them right
	// before and right after the buy phase, outside its timing, and puts
	// the difference in Report.Redis (an error: Report.RedisNote). Nil:
	// not read (miniredis has no INFO commandstats).
	Redis func(ctx context.Context) (RedisReading, error)
	// RedisNote says why Redis is not read when Redis is nil (the report
	// prints it after "n/a").
	RedisNote string
	// Peak marks the run as the peak of a sale (loadgen -peak): the
	// reports show its figures (PeakString, the HTML's "Peak" section).
	Peak bool
	// Steps are operator actions scripted into the buy phase (a pause, a
	// stock top-up, a resume), in At order: step k runs once, when the
	// first worker is about to send buy request number At (0-based, in
	// sending order), and no buy request from At on is sent before it has
	// returned. Each is marked in the report under its Name. An error
	// aborts the run.
	Steps []Step
	// Truth, when set, reads the stores' facts about the sale's
	// reservations straight from SQL (history.Truth: each order's user,
	// number and status, each FAILED outcome) after the run settled: the
	// buyers' histories are checked against it. Nil: they are checked
	// against the model of a buy only (loadgen's embedded server sets it).
	Truth func(ctx context.Context, activity string) (history.Truth, error)
	// Payments (refunds.go): PayShare of the orders are paid (0: the
	// default, 1/3; below 0: none), half through the fake provider's callback, half by POST
	// /api/pay; RefundShare of the paid ones are refunded through Refund
	// (the operator's refund; nil: none), restocked to the sale, not at
	// all, and to the shop in turn; the invariants are read again after.
	PayShare, RefundShare float64
	Refund                func(ctx context.Context, orderNo, restock string) error
	// A sale with variants (variants.go): each buyer picks a size by
	// VariantWeights (ID → weight; every size not named gets 0), else by a
	// Zipf law of exponent VariantZipf (0: 1) over the sizes in the order
	// the sale lists them, the first the most wanted. Unused for a sale
	// without variants.
	VariantWeights map[string]float64
	VariantZipf    float64
	// Seed, when not 0, seeds the buyers' choice of sizes (a run that can
	// be repeated); 0: random.
	Seed uint64
}

// Step is one scripted operator action (Config.Steps).
type Step struct {
	At   int    // the buy request (0-based, in sending order) it runs before
	Name string // the report's mark
	Do   func(ctx context.Context) error
}

// gate runs the steps of a buy phase in order: before request i is sent,
// every step with At <= i has run (once, by whichever worker got there
// first, while the others wait).
type gate struct {
	mu    sync.Mutex
	steps []Step
	rep   *Report
}

// newGate orders steps by At (stable: steps of one At keep their order).
func newGate(steps []Step, rep *Report) *gate {
	steps = slices.Clone(steps)
	slices.SortStableFunc(steps, func(x, y Step) int { return x.At - y.At })
	return &gate{steps: steps, rep: rep}
}

func (g *gate) before(ctx context.Context, i int) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	for len(g.steps) > 0 && g.steps[0].At <= i {
		st := g.steps[0]
		g.steps = g.steps[1:]
		if err := st.Do(ctx); err != nil {
			return fmt.Errorf("load: step %q: %w", st.Name, err)
		}
		g.rep.Mark(st.Name)
	}
	return nil
}

func (c *Config) defaults() {
	if c.Users <= 0 {
		c.Users = 10000
	}
	if c.FirstUser <= 0 {
		c.FirstUser = 1
	}
	if c.Repeat <= 0 {
		c.Repeat = 1
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 256
	}
	if c.Drain <= 0 {
		c.Drain = 60 * time.Second
	}
	c.Target = strings.TrimRight(c.Target, "/")
}

// Report is the outcome of a run.
type Report struct {
	Users       int
	BuyRequests int
	PrepTime    time.Duration // login + captcha + token + path for every attempt
	BuyTime     time.Duration // wall time of the buy phase
	Throughput  float64       // buy requests per second in the buy phase
	P50         time.Duration
	P99         time.Duration
	P999        time.Duration
	Max         time.Duration
	Outcomes    map[string]int // buy answers by status (queued, sold_out, ...)
	PrepErrors  map[string]int // refusals while preparing (e.g. no access token left)
	Accepted    int            // buy answers "queued"
	Final       map[string]int // final result of each accepted reservation (created, failed, ...)
	Server      Invariants     // counts read by the server from its DB and Redis
	Violations  []string       // empty = every invariant holds
	// Variants is what the buyers of each size got (a sale with variants;
	// nil otherwise), in the sale's order; VariantReleased counts, per
	// size, the accepted reservations finally released.
	Variants        []VariantRun
	VariantReleased map[string]int
	// History is the check of every buyer's history (package history):
	// every answer each buyer was given about its reservations (the buy,
	// the result polls during and after the drain, the payment of every
	// third order, reads of another buyer's reservation) against the model
	// of a buy and SQL. Its violations are in Violations too.
	History     history.Verdict
	HistoryNote string         // why the SQL cross-check was left out, when it was
	Paid        map[string]int // answers to the payments, by "code status"
	Refunded    map[string]int // the refunds, by "restock outcome" (refunds.go)
	Pushed      int            // result views pushed to the buyers following their result on SSE
	Streams     int            // SSE streams that pushed a view
	DrainTime   time.Duration
	// CPU used during the buy phase: by this process (GenCPU) and by the
	// server process as its /metrics reports it (ServerCPU; zero when
	// unknown). SameProcess is set when the server runs inside this
	// process: both figures then measure the same CPU.
	GenCPU, ServerCPU time.Duration
	SameProcess       bool
	// Redis is what the service's Redis servers did in the buy phase,
	// when Config.Redis read them (nil otherwise; RedisNote says why).
	Redis     *RedisUse
	RedisNote string
	// BareBefore and BareAfter are the bare server measured right before
	// and right after the buy phase (loadgen -baseline and -peak; nil when
	// not measured): Ratios and PeakString compare the buy phase with them.
	BareBefore, BareAfter *Report

	// The run as a time series (filled by Run; see WriteHTML).
	Config  Config    // the run's parameters, defaults applied
	Started time.Time // the start of the buy phase: Sample.Start and Event.At count from it
	Samples []Sample  // one per buy request, in the order they were sent
	Events  []Event   // named instants: "buy start", "buy end", "drain end" and every Mark, by time

	mu    sync.Mutex // guards marks
	marks []mark
}

// errUnavailable: the service answered 503 (it cannot read its stores now).
var errUnavailable = errors.New("load: service unavailable")

// Invariants is the JSON of GET /api/demo/invariants.
type Invariants struct {
	Activity      string         `json:"activity"`
	Initial       int64          `json:"initial"`         // stock loaded
	Adjusted      int64          `json:"adjusted"`        // Σ top-ups − withdrawals (the DB ledger)
	Total         int64          `json:"total"`           // the DB's total_stock (initial + adjusted)
	RedisTotal    int64          `json:"redis_total"`     // Redis's total (the same, unless one side drifted)
	RedisRemain   int64          `json:"redis_remaining"` // Redis stock left
	RedisLive     int64          `json:"redis_live"`      // reservations held (not released)
	PoolRemain    int64          `json:"pool_remaining"`  // DB fallback pool: units left
	PoolLive      int64          `json:"pool_live"`       // DB fallback pool: reservations held
	RedisReleased int64          `json:"redis_released"`  // reservations released
	DBStock       int64          `json:"db_stock"`        // activity.stock in the DB
	Orders        map[string]int `json:"orders"`          // DB orders by status
	LiveOrders    int64          `json:"live_orders"`     // CREATED + PAID + REFUNDED not to the sale
	RefundedSale  int64          `json:"refunded_sale"`   // orders REFUNDED with their units back on sale
	DistinctUsers int64          `json:"distinct_users"`  // users holding a live order
	MaxPerUser    int64          `json:"max_per_user"`    // most live units one user holds
	OutboxPending int64          `json:"outbox_pending"`
	InFlight      int64          `json:"in_flight"` // reservations with no order and not released
	Settled       bool           `json:"settled"`   // nothing in flight, outbox empty
	// PerUserLimit is the sale's cap per buyer (over all its variants).
	PerUserLimit int64 `json:"per_user_limit"`
	// A sale with variants: each variant's counts (the figures above are
	// their sums), the most units one buyer holds over all variants in the
	// Redis ledgers (MaxPerUser: in the DB), the orders beyond one per
	// reservation.
	Variants        []VariantInvariants `json:"variants,omitempty"`
	RedisMaxPerUser int64               `json:"redis_max_per_user"`
	PoolMaxPerUser  int64               `json:"pool_max_per_user"` // the same in the variants' DB fallback pools
	DuplicateOrders int64               `json:"duplicate_orders"`
}

// Sold is the number of units in live orders.
func (iv Invariants) Sold() int64 { return iv.LiveOrders }

// Units is the stock on sale: the initial stock plus the operators'
// top-ups minus their withdrawals.
func (iv Invariants) Units() int64 { return iv.Initial + iv.Adjusted }

type attempt struct {
	user    string
	bearer  string
	captcha string
	answer  string
	path    string
	token   string
	prepErr string
	outcome string
	resv    string
	stage   string    // the stage that answered the buy (StageOf when the body does not say)
	start   time.Time // when the buy request was sent
	body    []byte    // the buy request, encoded before the start line
	latency time.Duration
	reqID   string          // the buy's request_id
	h       *history.Client // the attempt's history: one client, one goroutine at a time
	last    string          // the result status last answered
	orderNo string          // the order number last answered
	variant string          // the size asked for (a sale with variants)
}

// Run executes the load and returns the report. An error means the run
// itself failed (server unreachable, bad config); invariant violations are
// listed in Report.Violations.
//
// The run goes in phases: wait for the sale's buy path to open; prepare
// (every user signs in, and each attempt gets its captcha, access token and
// buy path); wait for the start line; the buy phase; drain (wait for the
// order pipeline to settle and read the server's counts); the final result
// of every accepted reservation; the invariant check.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg.defaults()
	if cfg.Target == "" {
		return nil, errors.New("load: no target")
	}
	c := newClient(cfg.Target, cfg.Concurrency)
	c.metrics = cfg.MetricsToken
	defer c.hc.CloseIdleConnections()

	act, err := c.openSale(ctx, cfg.Progress)
	if err != nil {
		return nil, err
	}
	rep := &Report{Users: cfg.Users, Outcomes: map[string]int{}, PrepErrors: map[string]int{}, Final: map[string]int{}, Paid: map[string]int{}, Refunded: map[string]int{}, Config: cfg}
	if cfg.OnReport != nil {
		cfg.OnReport(rep)
	}
	rec := history.NewRecorder()
	r := &runner{cfg: cfg, c: c, rep: rep, atts: attempts(cfg, rec), rec: rec}
	var weights []float64
	if len(act.Variants) > 0 {
		if weights, err = variantWeights(act.Variants, cfg.VariantWeights, cfg.VariantZipf); err != nil {
			return nil, err
		}
		seed := cfg.Seed
		if seed == 0 {
			seed = rand.Uint64()
		}
		pickVariants(r.atts, act.Variants, weights, rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)))
	}
	if err := r.prepare(ctx); err != nil {
		return nil, err
	}
	if err := c.waitStart(ctx); err != nil {
		return nil, err
	}
	order, err := r.buy(ctx)
	if err != nil {
		return nil, err
	}
	r.tally(order)
	r.tallyVariants(act.Variants, weights)
	stopPolls, stopPushes := r.pollDuring(ctx), r.pushDuring(ctx)
	err = r.drain(ctx)
	stopPolls()
	stopPushes()
	if err != nil {
		return nil, err
	}
	rep.resolveMarks()
	if err := r.finals(ctx); err != nil {
		return nil, err
	}
	r.variantFinals()
	if err := r.histories(ctx, act.ID); err != nil {
		return nil, err
	}
	// After the payments and refunds (which read the counts again).
	rep.Violations = append(check(rep, act.TotalStock, cfg), rep.Violations...)
	return rep, nil
}

// runner is one Run between its setup and its invariant check: each phase
// is a method that fills its part of rep.
type runner struct {
	cfg  Config // defaults applied
	c    *client
	rep  *Report
	atts []*attempt // cfg.Repeat per user, user by user
	rec  *history.Recorder
	// pushed and streams count the views pushed and the streams that
	// pushed one (pushDuring).
	pushed, streams atomic.Int64
}

// attempts lists the buy attempts of a run: cfg.Repeat for each of the
// users cfg.FirstUser … cfg.FirstUser+cfg.Users-1.
func attempts(cfg Config, rec *history.Recorder) []*attempt {
	atts := make([]*attempt, 0, cfg.Users*cfg.Repeat)
	for i := 0; i < cfg.Users; i++ {
		id := strconv.Itoa(cfg.FirstUser + i)
		for r := 0; r < cfg.Repeat; r++ {
			atts = append(atts, &attempt{user: "user" + id, h: rec.NewClient(id)})
		}
	}
	return atts
}

// sleep waits d (not at all when d <= 0) or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// openSale reads the activity, checks the server runs with -demo, and
// waits until the signed buy path is released (saying so on progress, when
// there is one).
func (c *client) openSale(ctx context.Context, progress io.Writer) (Activity, error) {
	act, err := c.activity(ctx)
	if err != nil {
		return act, err
	}
	if !act.Demo {
		return act, errors.New("load: the server does not run with -demo (needed for the captcha hook and invariant report)")
	}
	wait := time.Until(act.PathOpens())
	if wait > 0 && progress != nil {
		fmt.Fprintf(progress, "waiting %v for the sale's buy path to open\n", wait.Round(time.Millisecond))
	}
	return act, sleep(ctx, wait)
}

// prepare is phase 1: every user signs in (once, however many attempts it
// makes) and each attempt gets its captcha, access token and path. It
// fills Report.PrepTime and counts the refusals in Report.PrepErrors.
func (r *runner) prepare(ctx context.Context) error {
	t0 := time.Now()
	var bearers sync.Map // user → bearer token
	err := parallel(ctx, r.cfg.Concurrency, len(r.atts), bar(r.cfg.Progress, len(r.atts), "prepare"), func(i int) error {
		a := r.atts[i]
		b, err := r.c.signIn(ctx, &bearers, a.user)
		if err != nil {
			return err
		}
		a.bearer = b
		return r.c.prepare(ctx, a)
	})
	if err != nil {
		return err
	}
	r.rep.PrepTime = time.Since(t0)
	for _, a := range r.atts {
		if a.prepErr != "" {
			r.rep.PrepErrors[a.prepErr]++
		}
	}
	return nil
}

// signIn returns user's bearer token from bearers, logging the user in
// the first time it is asked for.
func (c *client) signIn(ctx context.Context, bearers *sync.Map, user string) (string, error) {
	b, ok := bearers.Load(user)
	if !ok {
		tok, err := c.login(ctx, user)
		if err != nil {
			return "", err
		}
		b, _ = bearers.LoadOrStore(user, tok)
	}
	return b.(string), nil
}

// waitStart waits for the start line: the sale's start as the service
// reports it now. When the activity cannot be read, everyone fires at once.
func (c *client) waitStart(ctx context.Context) error {
	if act, err := c.activity(ctx); err == nil {
		return sleep(ctx, time.Until(act.Start()))
	}
	return nil
}

// buy is phase 2: every attempt sends its buy request, users in random
// order as in a real sale, with cfg.Steps run at their request numbers. It
// fills the buy phase's time, CPU and "buy start"/"buy end" marks, and
// returns the sending order (indexes into r.atts).
func (r *runner) buy(ctx context.Context) ([]int, error) {
	cfg, rep := r.cfg, r.rep
	order := rand.Perm(len(r.atts))
	if cfg.Beside != nil {
		if err := cfg.Beside(ctx, true); err != nil {
			return nil, err
		}
	}
	if cfg.OnBuyPhase != nil {
		cfg.OnBuyPhase(true)
	}
	redis0, redisErr := r.readRedis(ctx)
	srv0, srvOK := r.c.serverCPU(ctx)
	gen0, genOK := selfCPU()
	t1 := time.Now()
	rep.Started = t1
	rep.MarkAt("buy start", t1)
	g := newGate(cfg.Steps, rep)
	err := parallel(ctx, cfg.Concurrency, len(r.atts), bar(cfg.Progress, len(r.atts), "buy"), func(i int) error {
		if len(cfg.Steps) > 0 {
			if err := g.before(ctx, i); err != nil {
				return err
			}
		}
		return r.c.buy(ctx, r.atts[order[i]])
	})
	if err != nil {
		return nil, err
	}
	rep.BuyTime = time.Since(t1)
	rep.MarkAt("buy end", t1.Add(rep.BuyTime))
	if gen1, ok := selfCPU(); ok && genOK {
		rep.GenCPU = gen1 - gen0
	}
	if srv1, ok := r.c.serverCPU(ctx); ok && srvOK {
		rep.ServerCPU = srv1 - srv0
	}
	rep.SameProcess = cfg.SameProcess
	if cfg.OnBuyPhase != nil {
		cfg.OnBuyPhase(false)
	}
	if redisErr == nil {
		var redis1 RedisReading
		if redis1, redisErr = r.readRedis(ctx); redisErr == nil {
			rep.Redis = redisUse(redis0, redis1)
		}
	}
	if redisErr != nil {
		rep.RedisNote = redisErr.Error()
	}
	if cfg.Beside != nil {
		if err := cfg.Beside(ctx, false); err != nil {
			return nil, err
		}
	}
	return order, nil
}

// readRedis reads the service's Redis servers (Config.Redis); an error
// when there is no reader says why (Config.RedisNote).
func (r *runner) readRedis(ctx context.Context) (RedisReading, error) {
	if r.cfg.Redis == nil {
		return RedisReading{}, errors.New(cmp.Or(r.cfg.RedisNote, "Redis not read"))
	}
	rd, err := r.cfg.Redis(ctx)
	if err != nil {
		return rd, fmt.Errorf("reading Redis: %w", err)
	}
	return rd, nil
}

// tally fills the buy phase's figures from the answers: the throughput,
// the outcomes, the samples in sending order and the latency percentiles.
func (r *runner) tally(order []int) {
	rep := r.rep
	rep.BuyRequests = len(r.atts)
	rep.Throughput = float64(len(r.atts)) / rep.BuyTime.Seconds()
	lat := make([]time.Duration, len(r.atts))
	rep.Samples = make([]Sample, 0, len(r.atts))
	for i, a := range r.atts {
		lat[i] = a.latency
		rep.Outcomes[a.outcome]++
		if a.outcome == "queued" {
			rep.Accepted++
		}
	}
	for _, i := range order { // in the order they were sent
		a := r.atts[i]
		rep.Samples = append(rep.Samples, Sample{Start: a.start.Sub(rep.Started), Latency: a.latency, Outcome: a.outcome, Stage: a.stage})
	}
	rep.setLatency(lat)
}

// setLatency sets the percentiles and the maximum of lat (not empty),
// which it sorts.
func (r *Report) setLatency(lat []time.Duration) {
	slices.Sort(lat)
	r.P50, r.P99, r.P999, r.Max = Percentile(lat, 0.50), Percentile(lat, 0.99), Percentile(lat, 0.999), lat[len(lat)-1]
}

// drain is phase 3: it reads the server's counts every 100 ms until they
// are settled twice in a row or cfg.Drain has passed, and keeps the last
// in Report.Server. While the service answers 503 (it cannot read its
// stores, e.g. a Redis outage) it asks again, within the drain.
func (r *runner) drain(ctx context.Context) error {
	rep := r.rep
	t2 := time.Now()
	deadline := time.Now().Add(r.cfg.Drain)
	for {
		iv, err := r.c.invariants(ctx)
		if errors.Is(err, errUnavailable) && time.Now().Before(deadline) {
			if err := sleep(ctx, 100*time.Millisecond); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		final := iv.Settled && rep.Server.Settled // settled twice in a row: counts are final
		rep.Server = iv
		if final || time.Now().After(deadline) {
			break
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
	rep.DrainTime = time.Since(t2)
	rep.MarkAt("drain end", t2.Add(rep.DrainTime))
	return nil
}

// finals counts in Report.Final the final result of every accepted
// reservation, as a user would see it.
func (r *runner) finals(ctx context.Context) error {
	for _, a := range r.atts {
		if a.outcome != "queued" {
			continue
		}
		st, err := r.c.result(ctx, a)
		if err != nil {
			return err
		}
		r.rep.Final[st]++
	}
	return nil
}

// check lists every violated invariant (I1–I5 of docs/ARCHITECTURE.md),
// counted, not trusted.
func check(rep *Report, total int64, cfg Config) []string {
	var v []string
	iv := rep.Server
	add := func(f string, a ...any) { v = append(v, fmt.Sprintf(f, a...)) }
	if !iv.Settled {
		add("pipeline did not settle within %v: in flight %d, outbox pending %d", cfg.Drain, iv.InFlight, iv.OutboxPending)
	}
	if iv.Initial != total {
		add("initial stock %d != activity total %d", iv.Initial, total)
	}
	// The units on sale: the initial stock plus the operators' top-ups
	// minus their withdrawals, the same in the DB ledger, the DB row and
	// Redis.
	units := iv.Units()
	if iv.Total != units {
		add("I5 db total_stock %d != initial %d + adjustments %d", iv.Total, iv.Initial, iv.Adjusted)
	}
	if iv.RedisTotal+iv.PoolRemain+iv.PoolLive != units {
		add("I5 redis total %d + DB pool %d != initial %d + adjustments %d", iv.RedisTotal, iv.PoolRemain+iv.PoolLive, iv.Initial, iv.Adjusted)
	}
	// I1 no oversell.
	if iv.Sold() > units {
		add("I1 oversell: %d sold > %d units", iv.Sold(), units)
	}
	if iv.RedisRemain < 0 || iv.DBStock < 0 {
		add("I1 negative stock: redis %d, db %d", iv.RedisRemain, iv.DBStock)
	}
	// sold = stock when demand exceeds supply (each user may buy one).
	// (A refund to the sale after the buy phase puts its unit back.) Not
	// for a sale with variants: a skewed demand leaves the unwanted sizes.
	if len(iv.Variants) == 0 && int64(cfg.Users) >= units && iv.Sold()+iv.RefundedSale != units {
		add("sold %d + refunded to the sale %d != stock %d although %d users wanted one each", iv.Sold(), iv.RefundedSale, units, cfg.Users)
	}
	// I2/I4 no user twice (beyond the cap).
	if lim := max(iv.PerUserLimit, 1); iv.MaxPerUser > lim {
		add("I2 a user holds %d units (cap %d)", iv.MaxPerUser, lim)
	}
	if iv.PerUserLimit <= 1 && iv.DistinctUsers != iv.LiveOrders {
		add("I4 %d live orders for %d distinct users", iv.LiveOrders, iv.DistinctUsers)
	}
	// I3 nothing lost: orders = accepted - released.
	released := int64(rep.Final["failed"] + rep.Final["released"])
	if n := iv.LiveOrders + int64(iv.Orders["CANCELLED"]) + iv.RefundedSale; n != int64(rep.Accepted)-released {
		add("I3 orders %d (live %d + cancelled %d + refunded to the sale %d) != accepted %d - released %d",
			n, iv.LiveOrders, iv.Orders["CANCELLED"], iv.RefundedSale, rep.Accepted, released)
	}
	if iv.RedisLive+iv.PoolLive != iv.LiveOrders {
		add("I3 redis (and the DB pool) hold %d+%d live reservations but the DB %d live orders", iv.RedisLive, iv.PoolLive, iv.LiveOrders)
	}
	if n := rep.Final["queued"]; n > 0 {
		add("I3 %d accepted reservations still queued after the drain", n)
	}
	// I5 conservation.
	if iv.RedisRemain+iv.RedisLive+iv.PoolRemain+iv.PoolLive != units {
		add("I5 redis remaining %d + live reservations %d + pool remaining %d + pool reservations %d != units %d",
			iv.RedisRemain, iv.RedisLive, iv.PoolRemain, iv.PoolLive, units)
	}
	if iv.DBStock+iv.LiveOrders != units {
		add("I5 db stock %d + live orders %d != units %d", iv.DBStock, iv.LiveOrders, units)
	}
	if len(iv.Variants) > 0 {
		v = append(v, CheckVariants(iv, rep.variantAccepted(), rep.VariantReleased)...)
	}
	return v
}

// String renders the report for a terminal.
func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "users %d, buy requests %d (prepare %v, buy phase %v, drain %v)\n",
		r.Users, r.BuyRequests, r.PrepTime.Round(time.Millisecond), r.BuyTime.Round(time.Millisecond), r.DrainTime.Round(time.Millisecond))
	fmt.Fprintf(&b, "throughput  %.0f buy requests/s\n", r.Throughput)
	fmt.Fprintf(&b, "latency     p50 %v  p99 %v  p999 %v  max %v\n", r.P50, r.P99, r.P999, r.Max)
	if n := time.Duration(max(r.BuyRequests, 1)); r.GenCPU > 0 {
		if r.SameProcess {
			fmt.Fprintf(&b, "cpu         %v per buy (generator + embedded server, one process)\n", (r.GenCPU / n).Round(100*time.Nanosecond))
		} else if r.ServerCPU > 0 {
			fmt.Fprintf(&b, "cpu         server %v per buy, generator %v per buy\n", (r.ServerCPU / n).Round(100*time.Nanosecond), (r.GenCPU / n).Round(100*time.Nanosecond))
		} else {
			fmt.Fprintf(&b, "cpu         generator %v per buy (server CPU unknown)\n", (r.GenCPU / n).Round(100*time.Nanosecond))
		}
	}
	fmt.Fprintf(&b, "outcomes    %s\n", fmtMap(r.Outcomes))
	if len(r.PrepErrors) > 0 {
		fmt.Fprintf(&b, "prepare     %s\n", fmtMap(r.PrepErrors))
	}
	fmt.Fprintf(&b, "accepted    %d → final %s\n", r.Accepted, fmtMap(r.Final))
	s := r.Server
	fmt.Fprintf(&b, "server      stock %d (initial %d %+d adjusted), sold %d, db stock %d, redis remaining %d, live reservations %d, released %d, orders %s, distinct buyers %d, outbox pending %d\n",
		s.Units(), s.Initial, s.Adjusted, s.Sold(), s.DBStock, s.RedisRemain, s.RedisLive, s.RedisReleased, fmtMap(s.Orders), s.DistinctUsers, s.OutboxPending)
	b.WriteString(r.variantLines())
	if len(r.Violations) == 0 {
		b.WriteString("invariants  OK (sold = stock, no oversell, no user twice, orders = accepted - released, redis remaining + live = stock, db stock + live orders = stock, stock = initial + adjustments in Redis, the DB row and the DB ledger)\n")
	} else {
		b.WriteString("invariants  VIOLATED:\n")
		for _, v := range r.Violations {
			b.WriteString("  - " + v + "\n")
		}
	}
	fmt.Fprintf(&b, "histories   %s\n", r.historyLine())
	return b.String()
}

func fmtMap(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}

func bar(w io.Writer, n int, desc string) *progressbar.ProgressBar {
	if w == nil {
		return nil
	}
	return progressbar.NewOptions(n,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(fmt.Sprintf("%-8s", desc)),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetItsString("req"),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionOnCompletion(func() { fmt.Fprintln(w) }),
		progressbar.OptionSetWidth(30),
	)
}

// parallel runs fn(0..n-1) on workers goroutines; the first error stops it.
func parallel(ctx context.Context, workers, n int, pb *progressbar.ProgressBar, fn func(i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var next atomic.Int64
	var once sync.Once
	var firstErr error
	var wg sync.WaitGroup
	for w := 0; w < min(workers, n); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					once.Do(func() { firstErr = err; cancel() })
					return
				}
				if pb != nil {
					_ = pb.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if pb != nil {
		_ = pb.Finish()
	}
	if firstErr != nil {
		return firstErr
	}
	return ctx.Err()
}

// client speaks the service's JSON API over fasthttp's client, which needs
// a fraction of net/http's CPU per request: the generator shares the
// machine with the service it measures (BENCHMARKS.md).
type client struct {
	base    string
	hc      *fasthttp.Client
	timeout time.Duration
	metrics string // bearer token of /metrics
}

func newClient(base string, conns int) *client {
	return &client{base: base, timeout: 30 * time.Second, hc: &fasthttp.Client{
		MaxConnsPerHost:               conns,
		MaxConnWaitTimeout:            30 * time.Second,
		MaxIdleConnDuration:           90 * time.Second,
		ReadTimeout:                   30 * time.Second,
		WriteTimeout:                  30 * time.Second,
		NoDefaultUserAgentHeader:      true,
		DisablePathNormalizing:        true,
		DisableHeaderNamesNormalizing: true,
		Dial:                          (&fasthttp.TCPDialer{Concurrency: conns}).Dial,
	}}
}

// Activity is the JSON of GET /api/activity (the fields the generator uses).
type Activity struct {
	ID         string    `json:"id"`
	TotalStock int64     `json:"total_stock"`
	Remaining  int64     `json:"remaining"`
	StartTime  time.Time `json:"start_time"`
	EndTime    time.Time `json:"end_time"`
	PathOpen   time.Time `json:"path_open_time"`
	ServerTime time.Time `json:"server_time"`
	Demo       bool      `json:"demo"`
	// Variants are the sale's sizes, each with its units left (a sale
	// with variants; empty otherwise).
	Variants  []VariantView `json:"variants"`
	clockSkew time.Duration
}

// PathOpens returns when the buy path opens, in this process's clock.
func (a Activity) PathOpens() time.Time { return a.PathOpen.Add(a.clockSkew) }

// Start returns the sale start in this process's clock.
func (a Activity) Start() time.Time { return a.StartTime.Add(a.clockSkew) }

type apiResp struct {
	Status      string `json:"status"`
	Message     string `json:"message"`
	Token       string `json:"token"`
	ID          string `json:"id"`
	DemoAnswer  string `json:"demo_answer"`
	Path        string `json:"path"`
	Reservation string `json:"reservation"`
	OrderNo     string `json:"order_no"`
	Stage       string `json:"stage"` // the stage that refused, when the service says
	Reason      string `json:"reason"`
}

// doRetry is do, retried a few times while the server answers 503 (busy):
// the preparation steps are not what is measured, and a real user retries.
func (c *client) doRetry(ctx context.Context, method, path, bearer string, body any, out any) (int, error) {
	for attempt := 1; ; attempt++ {
		code, err := c.do(ctx, method, path, bearer, body, out)
		if err != nil || code != http.StatusServiceUnavailable || attempt == 8 {
			return code, err
		}
		select {
		case <-time.After(time.Duration(attempt*attempt) * 20 * time.Millisecond):
		case <-ctx.Done():
			return code, ctx.Err()
		}
	}
}

func (c *client) do(ctx context.Context, method, path, bearer string, body any, out any) (int, error) {
	var b []byte
	switch v := body.(type) {
	case nil:
	case []byte:
		b = v
	default:
		var err error
		if b, err = json.Marshal(body); err != nil {
			return 0, err
		}
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	deadline := time.Now().Add(c.timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(c.base + path)
	req.Header.SetMethod(method)
	if body != nil {
		req.Header.SetContentType("application/json")
		req.SetBodyRaw(b)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	if err := c.hc.DoDeadline(req, resp, deadline); err != nil {
		return 0, fmt.Errorf("load: %s %s: %w", method, path, err)
	}
	code := resp.StatusCode()
	if rb := resp.Body(); out != nil && len(rb) > 0 {
		if err := json.Unmarshal(rb, out); err != nil {
			return code, fmt.Errorf("load: %s %s: %d %q: %w", method, path, code, rb, err)
		}
	}
	return code, nil
}

func (c *client) activity(ctx context.Context) (Activity, error) {
	var a Activity
	t0 := time.Now()
	code, err := c.do(ctx, "GET", "/api/activity", "", nil, &a)
	if err != nil {
		return a, err
	}
	if code != 200 {
		return a, fmt.Errorf("load: GET /api/activity: %d", code)
	}
	mid := t0.Add(time.Since(t0) / 2)
	a.clockSkew = mid.Sub(a.ServerTime)
	return a, nil
}

func (c *client) login(ctx context.Context, user string) (string, error) {
	var r apiResp
	code, err := c.doRetry(ctx, "POST", "/api/login", "", map[string]string{"username": user}, &r)
	if err != nil {
		return "", err
	}
	if code != 200 || r.Token == "" {
		return "", fmt.Errorf("load: login %s: %d %s", user, code, r.Message)
	}
	return r.Token, nil
}

// prepare gets a captcha (+ its answer through the demo hook), an access
// token and the signed buy path. A refusal (no token left) is recorded, not
// an error: that user still tries to buy, as a real one would.
func (c *client) prepare(ctx context.Context, a *attempt) error {
	var r apiResp
	code, err := c.doRetry(ctx, "GET", "/api/captcha?image=none", a.bearer, nil, &r)
	if err != nil {
		return err
	}
	if code != 200 {
		return fmt.Errorf("load: captcha: %d %s", code, r.Message)
	}
	a.captcha, a.answer = r.ID, r.DemoAnswer
	if a.answer == "" {
		return fmt.Errorf("load: the server gave no demo captcha answer (is it running with -demo?)")
	}
	r = apiResp{}
	code, err = c.doRetry(ctx, "POST", "/api/activity/token", a.bearer, struct{}{}, &r)
	if err != nil {
		return err
	}
	switch {
	case code == 200:
		a.token, a.path = r.Token, r.Path
	case code >= 400 && code < 500 && r.Status != "":
		a.prepErr = "token:" + r.Status
	default:
		return fmt.Errorf("load: access token: %d %s", code, r.Message)
	}
	defer func() {
		// request_id: the buyer's idempotency key, so a retried buy gets
		// its reservation back instead of a refusal.
		var rid [9]byte
		_, _ = crand.Read(rid[:])
		a.reqID = hex.EncodeToString(rid[:])
		body := map[string]string{"token": a.token, "captcha_id": a.captcha, "captcha": a.answer, "request_id": a.reqID}
		if a.variant != "" {
			body["variant"] = a.variant
		}
		a.body, _ = json.Marshal(body)
	}()
	if a.path != "" {
		return nil // the token answer carried the signed path
	}
	r = apiResp{}
	code, err = c.doRetry(ctx, "GET", "/api/activity/path", a.bearer, nil, &r)
	if err != nil {
		return err
	}
	switch {
	case code == 200:
		a.path = r.Path
	case code >= 400 && code < 500 && r.Status != "":
		if a.prepErr == "" {
			a.prepErr = "path:" + r.Status
		}
	default:
		return fmt.Errorf("load: path: %d %s", code, r.Message)
	}
	return nil
}

func (c *client) buy(ctx context.Context, a *attempt) error {
	path := a.path
	if path == "" {
		path = "/api/buy/none" // a user without a path still tries, and is refused
	}
	var r apiResp
	a.start = time.Now()
	code, err := c.do(ctx, "POST", path, a.bearer, a.body, &r)
	a.latency = time.Since(a.start)
	a.h.Add(history.Op{Kind: history.Buy, Attempt: a.reqID, Reservation: r.Reservation, Start: a.h.Since(a.start),
		End: a.h.Since(a.start.Add(a.latency)), Code: code, Status: r.Status, OrderNo: r.OrderNo, Reason: r.Reason})
	if err != nil {
		return err
	}
	switch {
	case code == http.StatusAccepted:
		a.outcome, a.resv = "queued", r.Reservation
	case r.Status != "":
		a.outcome = r.Status
	default:
		a.outcome = "http_" + strconv.Itoa(code)
	}
	a.stage = r.Stage
	switch {
	case a.stage != "":
	case a.path == "" && a.outcome == "token":
		a.stage = "path" // no signed path (no token left): refused by the path check
	default:
		a.stage = StageOf(a.outcome)
	}
	if code >= 500 && code != http.StatusServiceUnavailable {
		return fmt.Errorf("load: buy: %d %s", code, r.Message)
	}
	return nil
}

func (c *client) result(ctx context.Context, a *attempt) (string, error) {
	return c.resultOf(ctx, a, a.resv)
}

// resultOf is GET /api/result/{resv} as a's buyer, recorded in a's
// history; it returns the answer's status (an error for anything but
// 200).
func (c *client) resultOf(ctx context.Context, a *attempt, resv string) (string, error) {
	var r apiResp
	start := a.h.Now()
	code, err := c.do(ctx, "GET", "/api/result/"+url.PathEscape(resv), a.bearer, nil, &r)
	a.h.Add(history.Op{Kind: history.Result, Reservation: resv, Start: start, End: a.h.Now(), Code: code,
		Status: r.Status, OrderNo: r.OrderNo, Reason: r.Reason, Named: r.Reservation})
	if err != nil {
		return "", err
	}
	if resv == a.resv && code == 200 {
		a.last = r.Status
		if r.OrderNo != "" {
			a.orderNo = r.OrderNo
		}
	}
	if code != 200 {
		return "", fmt.Errorf("load: result %s: %d %s", resv, code, r.Message)
	}
	return r.Status, nil
}

func (c *client) invariants(ctx context.Context) (Invariants, error) {
	var iv Invariants
	code, err := c.do(ctx, "GET", "/api/demo/invariants", "", nil, &iv)
	if err != nil {
		return iv, err
	}
	if code != 200 {
		if code == http.StatusServiceUnavailable {
			return iv, fmt.Errorf("load: invariants: %d: %w", code, errUnavailable)
		}
		return iv, fmt.Errorf("load: invariants: %d", code)
	}
	return iv, nil
}
