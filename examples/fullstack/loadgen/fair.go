package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckillkit/seckill/examples/fullstack/app"
	"github.com/seckillkit/seckill/examples/fullstack/internal/admitlog"
	"github.com/seckillkit/seckill/waitroom"
	"github.com/seckillkit/seckill/waitroom/draw"
)

// The fair modes' load (-sale-mode queue | draw), on the embedded server
// only. Queue: the first half of the users join before the start (the
// pre-queue), the rest after it; every user polls its place every
// fairPoll until admitted, then takes the access token with its pass and
// buys. Draw: every user enters before the start; at the start each polls
// its outcome, and the winners buy. The queue's length and admissions are
// sampled every fairSample (the HTML report's timeline). Invariants: no
// user admitted twice, admission order = the verified order
// (waitroom.VerifyOrder of the published seed and entries), every joiner
// admitted or counted abandoned (no place lost silently), the measured
// admission rate against -queue-rate; draw: winners = stock exactly, the
// published draw verifies (draw.Verify), only winners bought; and the
// stock's invariants counted from Redis and SQL (no oversell, at most one
// unit per buyer, remaining + live = total).

const (
	fairPoll   = 500 * time.Millisecond
	fairSample = 200 * time.Millisecond
)

// fairSampleAt is one sample of the queue: time since the start of the
// run, waiting and admitted (draw: entries and winners).
type fairSampleAt struct {
	At       time.Duration
	Waiting  int64
	Admitted int64
}

// fairReport is the fair run's outcome.
type fairReport struct {
	Mode, When                   string
	Users, Conc                  int
	Stock                        int64
	Rate                         float64 // -queue-rate
	Cap                          int64
	Joined, Admitted, Abandoned  int64
	PreQueue                     int64
	Bought, Refused, Winners     int64
	MeasuredRate, RateErr        float64 // admissions per second in the steady part; relative error
	Elapsed                      time.Duration
	Samples                      []fairSampleAt
	Violations, Notes            []string
	LiveOrders, MaxPerUser, Held int64
}

// runFair runs the fair mode's load against an embedded server.
func runFair(ctx context.Context, cfg app.Config, target string, conc int, drain time.Duration, report string) (int, error) {
	if target != "" {
		return 0, fmt.Errorf("-sale-mode %s runs on the embedded server only (no -target)", cfg.SaleMode)
	}
	if cfg.StartIn < 2*time.Second {
		cfg.StartIn = 3 * time.Second // room for a pre-queue (queue) or the entries (draw)
	}
	cfg.PathLead = cfg.StartIn
	clean := freshSale(&cfg)
	defer clean()
	a, err := app.New(ctx, cfg, app.NewLogger(os.Stderr, cfg.LogLevel))
	if err != nil {
		return 0, err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = a.Shutdown(sctx)
	}()
	base, err := a.Start()
	if err != nil {
		return 0, err
	}
	fmt.Printf("embedded server at %s (redis %s, db %s), sale mode %s, %d users vs %d stock\n",
		base, a.Infra().RedisKind, a.Infra().DBKind, cfg.SaleMode, cfg.DemoUsers, cfg.Stock)
	var act struct {
		StartTime time.Time `json:"start_time"`
	}
	if err := fairGet(base, "/api/activity", "", nil, &act); err != nil {
		return 0, err
	}
	r := &fairReport{Mode: cfg.SaleMode, When: time.Now().UTC().Format(time.RFC3339), Users: cfg.DemoUsers, Conc: conc,
		Stock: cfg.Stock, Rate: cfg.QueueRate, Cap: cfg.QueueCap}
	f := &fairLoad{base: base, start: act.StartTime, sem: make(chan struct{}, conc), t0: time.Now()}
	sctx, stopSampling := context.WithCancel(ctx)
	var sampled sync.WaitGroup
	sampled.Add(1)
	go func() { defer sampled.Done(); f.sample(sctx, a, r) }()
	var wg sync.WaitGroup
	for i := 1; i <= cfg.DemoUsers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f.user(ctx, cfg.SaleMode, i, i > cfg.DemoUsers/2); err != nil {
				f.fail(fmt.Sprintf("user%d: %v", i, err))
			}
		}()
	}
	wg.Wait()
	r.Elapsed = time.Since(f.t0)
	stopSampling()
	sampled.Wait()
	r.Joined, r.Bought, r.Refused, r.Winners = f.joined.Load(), f.bought.Load(), f.refused.Load(), f.winners.Load()
	r.Violations = append(r.Violations, f.errs...)
	f.check(ctx, a, cfg, r, drain)
	fmt.Print(r.String())
	if report != "" {
		if err := r.writeHTML(report); err != nil {
			return 0, err
		}
		fmt.Printf("report      %s\n", report)
	}
	if len(r.Violations) > 0 {
		return 1, nil
	}
	return 0, nil
}

// freshSale makes the run a fresh sale on real servers: the sale, its
// users and its tokens are the same every run (activity 1, user1..N), so
// a second run under the same key prefix met the first run's spent
// access tokens and sold stock (its winners were refused
// "already_bought") — on a Redis Cluster as on a standalone Redis. The
// Redis keys go under cfg.KeyPrefix + "lg<random>:" and the MySQL or
// PostgreSQL database is cfg.MySQLDatabase + "_lg<random>", dropped at
// the end; the returned func deletes the run's keys (every master of a
// Cluster). On the embedded servers it changes nothing.
func freshSale(cfg *app.Config) func() {
	var b [5]byte
	_, _ = rand.Read(b[:])
	tag := hex.EncodeToString(b[:])
	if cfg.MySQLDSN != "" || cfg.PostgresDSN != "" {
		cfg.MySQLDatabase += "_lg" + tag
		cfg.DropDatabaseOnClose = true
	}
	var clients []*redis.Client
	var cluster *redis.ClusterClient
	switch {
	case len(cfg.RedisCluster) > 0:
		cluster = redis.NewClusterClient(&redis.ClusterOptions{Addrs: cfg.RedisCluster})
	case cfg.RedisAddr != "" || cfg.StockRedisAddr != "" || cfg.RedisSentinel != "":
		for _, addr := range []string{cfg.RedisAddr, cfg.StockRedisAddr} {
			if addr != "" {
				clients = append(clients, redis.NewClient(&redis.Options{Addr: addr}))
			}
		}
	default:
		return func() {}
	}
	cfg.KeyPrefix += "lg" + tag + ":"
	fmt.Printf("fresh sale: Redis key prefix %s\n", cfg.KeyPrefix)
	prefix := cfg.KeyPrefix
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		del := func(ctx context.Context, c *redis.Client) error {
			it := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
			for it.Next(ctx) {
				c.Del(ctx, it.Val())
			}
			return it.Err()
		}
		if cluster != nil {
			_ = cluster.ForEachMaster(ctx, del)
			_ = cluster.Close()
		}
		for _, c := range clients {
			_ = del(ctx, c)
			_ = c.Close()
		}
	}
}

type fairLoad struct {
	base                             string
	start, t0                        time.Time
	sem                              chan struct{} // bounds requests in flight (-c)
	joined, bought, refused, winners atomic.Int64
	mu                               sync.Mutex
	errs                             []string
}

func (f *fairLoad) fail(s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.errs) < 20 {
		f.errs = append(f.errs, s)
	}
}

// call is one request, inside the concurrency bound.
func (f *fairLoad) call(method, path, bearer string, hdr map[string]string, body, out any) (int, error) {
	f.sem <- struct{}{}
	defer func() { <-f.sem }()
	return fairDo(f.base, method, path, bearer, hdr, body, out)
}

func fairDo(base, method, path, bearer string, hdr map[string]string, body, out any) (int, error) {
	var rd io.Reader = http.NoBody
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		return 0, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if out != nil {
		_ = json.NewDecoder(resp.Body).Decode(out)
	} else {
		_, _ = io.Copy(io.Discard, resp.Body)
	}
	return resp.StatusCode, nil
}

func fairGet(base, path, bearer string, hdr map[string]string, out any) error {
	code, err := fairDo(base, "GET", path, bearer, hdr, nil, out)
	if err == nil && code != 200 {
		err = fmt.Errorf("GET %s: %d", path, code)
	}
	return err
}

// user is one buyer's whole run.
func (f *fairLoad) user(ctx context.Context, mode string, i int, after bool) error {
	var login struct{ Token string }
	if code, err := f.call("POST", "/api/login", "", nil, map[string]string{"username": "user" + strconv.Itoa(i)}, &login); err != nil || code != 200 {
		return fmt.Errorf("login: %d %v", code, err)
	}
	b := login.Token
	if mode == app.SaleDraw {
		if code, err := f.call("POST", "/api/draw/enter", b, nil, struct{}{}, nil); err != nil || code != 200 {
			return fmt.Errorf("enter: %d %v", code, err)
		}
		f.joined.Add(1)
		if err := waitUntil(ctx, f.start); err != nil {
			return err
		}
		for {
			var o struct{ Status string }
			if code, err := f.call("GET", "/api/draw/outcome", b, nil, nil, &o); err != nil || code != 200 {
				return fmt.Errorf("outcome: %d %v", code, err)
			}
			switch o.Status {
			case "entered":
				if err := sleepCtx(ctx, fairPoll); err != nil {
					return err
				}
				continue
			case "winner":
				f.winners.Add(1)
				return f.buy(b, nil)
			default: // waitlisted or lost: told; the token is refused
				code, err := f.call("POST", "/api/activity/token", b, nil, struct{}{}, nil)
				if err != nil || code != 403 {
					return fmt.Errorf("a %s user's token: %d %v, want 403", o.Status, code, err)
				}
				return nil
			}
		}
	}
	if after {
		if err := waitUntil(ctx, f.start.Add(200*time.Millisecond)); err != nil {
			return err
		}
	}
	var p struct {
		Ticket, State, Pass string
	}
	if code, err := f.call("POST", "/api/queue/join", b, nil, struct{}{}, &p); err != nil || code != 200 {
		return fmt.Errorf("join: %d %v", code, err)
	}
	f.joined.Add(1)
	ticket := p.Ticket
	for p.State != "admitted" {
		if p.State == "left" || p.State == "done" {
			return fmt.Errorf("queue state %q before admission", p.State)
		}
		if err := sleepCtx(ctx, fairPoll); err != nil {
			return err
		}
		if code, err := f.call("GET", "/api/queue/poll", b, map[string]string{"X-Queue-Ticket": ticket}, nil, &p); err != nil || code != 200 {
			return fmt.Errorf("poll: %d %v", code, err)
		}
	}
	return f.buy(b, map[string]string{"X-Queue-Pass": p.Pass})
}

// buy takes the access token (hdr: the pass), the captcha and the path,
// and buys once.
func (f *fairLoad) buy(b string, hdr map[string]string) error {
	var c struct {
		ID         string `json:"id"`
		DemoAnswer string `json:"demo_answer"`
	}
	if code, err := f.call("GET", "/api/captcha?image=none", b, nil, nil, &c); err != nil || code != 200 {
		return fmt.Errorf("captcha: %d %v", code, err)
	}
	var tk struct{ Token, Status string }
	code, err := f.call("POST", "/api/activity/token", b, hdr, struct{}{}, &tk)
	if err != nil {
		return err
	}
	if code != 200 {
		if tk.Status == "sold_out" {
			f.refused.Add(1)
			return nil
		}
		return fmt.Errorf("token: %d %s", code, tk.Status)
	}
	var path struct{ Path string }
	if code, err := f.call("GET", "/api/activity/path", b, nil, nil, &path); err != nil || code != 200 {
		return fmt.Errorf("path: %d %v", code, err)
	}
	code, err = f.call("POST", path.Path, b, nil, map[string]string{"token": tk.Token, "captcha_id": c.ID, "captcha": c.DemoAnswer, "request_id": "fair1"}, nil)
	switch {
	case err != nil:
		return err
	case code == 202 || code == 200:
		f.bought.Add(1)
	default:
		f.refused.Add(1)
	}
	return nil
}

func waitUntil(ctx context.Context, t time.Time) error { return sleepCtx(ctx, time.Until(t)) }

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// sample reads the fair figures every fairSample until ctx ends.
func (f *fairLoad) sample(ctx context.Context, a *app.App, r *fairReport) {
	t := time.NewTicker(fairSample)
	defer t.Stop()
	for {
		if st, err := a.FairStats(context.WithoutCancel(ctx)); err == nil {
			r.Samples = append(r.Samples, fairSampleAt{At: time.Since(f.t0), Waiting: st.Waiting, Admitted: st.Admitted})
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
	}
}

// check counts the invariants.
func (f *fairLoad) check(ctx context.Context, a *app.App, cfg app.Config, r *fairReport, drain time.Duration) {
	bad := func(format string, args ...any) { r.Violations = append(r.Violations, fmt.Sprintf(format, args...)) }
	pub, err := a.FairPublished(ctx)
	if err != nil {
		bad("published: %v", err)
		return
	}
	st, err := a.FairStats(ctx)
	if err != nil {
		bad("stats: %v", err)
		return
	}
	seed, _ := hex.DecodeString(pub.Seed)
	if r.Mode == app.SaleQueue {
		r.Admitted, r.Abandoned, r.PreQueue = st.Admitted, st.Abandoned, st.PreQueue
		if err := waitroom.VerifyOrder(seed, pub.Commitment, pub.Entries, pub.Order); err != nil {
			bad("the published pre-queue does not verify: %v", err)
		}
		seen, _, err := admitlog.Check(pub.Order, pub.Batches)
		if err != nil {
			bad("%v", err)
		}
		if int64(len(seen)) != st.Admitted {
			bad("the admission log holds %d users, the room counts %d admitted", len(seen), st.Admitted)
		}
		if st.Admitted+st.Abandoned+st.Waiting != r.Joined {
			bad("places: admitted %d + abandoned %d + waiting %d != joined %d (a place lost silently)", st.Admitted, st.Abandoned, st.Waiting, r.Joined)
		}
		r.MeasuredRate = steadyRate(r.Samples)
		if cfg.QueueRate > 0 && r.MeasuredRate > 0 {
			r.RateErr = r.MeasuredRate/cfg.QueueRate - 1
		}
	} else {
		n := min(int(cfg.Stock), len(pub.Order))
		r.Admitted = int64(n)
		if err := draw.Verify(draw.VerifyParams{Seed: seed, Commitment: pub.Commitment, Entries: pub.Entries, Stock: int(cfg.Stock), Winners: pub.Order[:n]}); err != nil {
			bad("the published draw does not verify: %v", err)
		}
		if r.Winners != int64(n) {
			bad("%d users were told they won, want the stock %d", r.Winners, n)
		}
		if r.Bought > int64(n) {
			bad("%d bought, more than the %d winners", r.Bought, n)
		}
	}
	// The stock's invariants, counted once the pipeline settled.
	deadline := time.Now().Add(drain)
	for {
		iv, err := a.Invariants(ctx)
		if err != nil {
			bad("invariants: %v", err)
			return
		}
		if iv.Settled || time.Now().After(deadline) {
			r.LiveOrders, r.MaxPerUser, r.Held = iv.LiveOrders, iv.MaxPerUser, iv.RedisLive
			if !iv.Settled {
				r.Notes = append(r.Notes, "the pipeline did not settle within -drain")
			}
			if iv.LiveOrders > iv.Total {
				bad("oversell: %d live orders for %d units", iv.LiveOrders, iv.Total)
			}
			if iv.MaxPerUser > cfg.PerUserLimit {
				bad("a buyer holds %d units (limit %d)", iv.MaxPerUser, cfg.PerUserLimit)
			}
			if iv.RedisRemain+iv.RedisLive != iv.RedisTotal {
				bad("stock not conserved: remaining %d + live %d != total %d", iv.RedisRemain, iv.RedisLive, iv.RedisTotal)
			}
			if c := iv.Fair; c == nil || c.AdmittedTwice != 0 || c.BuyersNotAdmitted != 0 {
				bad("fair counts %+v: want nobody admitted twice and every buyer admitted (or a winner)", c)
			}
			if iv.Settled && iv.LiveOrders != r.Bought {
				bad("%d buys accepted, %d live orders", r.Bought, iv.LiveOrders)
			}
			return
		}
		if sleepCtx(ctx, 200*time.Millisecond) != nil {
			return
		}
	}
}

// steadyRate is the admissions per second between the samples at 10 % and
// 90 % of the final admitted count (the steady part: not the banked
// first second, not the tail).
func steadyRate(s []fairSampleAt) float64 {
	if len(s) < 2 {
		return 0
	}
	total := s[len(s)-1].Admitted
	var lo, hi *fairSampleAt
	for i := range s {
		if lo == nil && s[i].Admitted >= total/10 && s[i].Admitted > 0 {
			lo = &s[i]
		}
		if s[i].Admitted <= total*9/10 {
			hi = &s[i]
		}
	}
	if lo == nil || hi == nil || hi.At <= lo.At {
		return 0
	}
	return float64(hi.Admitted-lo.Admitted) / (hi.At - lo.At).Seconds()
}

// String is the text report.
func (r *fairReport) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "mode        %s, %d users, %d stock, %d connections, %v\n", r.Mode, r.Users, r.Stock, r.Conc, r.Elapsed.Round(time.Millisecond))
	if r.Mode == app.SaleQueue {
		fmt.Fprintf(&b, "queue       joined %d (pre-queue %d), admitted %d, abandoned %d\n", r.Joined, r.PreQueue, r.Admitted, r.Abandoned)
		fmt.Fprintf(&b, "rate        set %.1f/s, measured %.2f/s (error %+.2f%%), cap %d\n", r.Rate, r.MeasuredRate, 100*r.RateErr, r.Cap)
	} else {
		fmt.Fprintf(&b, "draw        entries %d, winners told %d\n", r.Joined, r.Winners)
	}
	fmt.Fprintf(&b, "buys        accepted %d, refused %d; live orders %d, max per user %d\n", r.Bought, r.Refused, r.LiveOrders, r.MaxPerUser)
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "note        %s\n", n)
	}
	if len(r.Violations) == 0 {
		if r.Mode == app.SaleQueue {
			b.WriteString("invariants  OK: no user admitted twice, admission order = verified order, no place lost, no oversell\n")
		} else {
			b.WriteString("invariants  OK: the draw verifies, winners = stock, only winners bought, no oversell\n")
		}
	}
	for _, v := range r.Violations {
		fmt.Fprintf(&b, "VIOLATION   %s\n", v)
	}
	return b.String()
}

// writeHTML writes the fair run as one self-contained page: the queue
// length and the admitted count over time (inline SVG), the admissions
// per second, the figures and the invariants.
func (r *fairReport) writeHTML(path string) error {
	const w, h = 800.0, 240.0
	var maxT, maxY float64
	for _, s := range r.Samples {
		maxT = max(maxT, s.At.Seconds())
		maxY = max(maxY, float64(s.Waiting), float64(s.Admitted))
	}
	maxT, maxY = max(maxT, 1), max(maxY, 1)
	line := func(v func(fairSampleAt) int64) string {
		var b strings.Builder
		for _, s := range r.Samples {
			fmt.Fprintf(&b, "%.1f,%.1f ", s.At.Seconds()/maxT*w, h-float64(v(s))/maxY*h)
		}
		return b.String()
	}
	// Admissions per second, per second of the run.
	type bar struct{ X, Y, W, H float64 }
	var bars []bar
	var maxR float64
	perSec := map[int]int64{}
	secs := int(maxT) + 1
	for i := 1; i < len(r.Samples); i++ {
		perSec[int(r.Samples[i].At.Seconds())] += r.Samples[i].Admitted - r.Samples[i-1].Admitted
	}
	for _, v := range perSec {
		maxR = max(maxR, float64(v))
	}
	maxR = max(maxR, 1)
	for s := 0; s < secs; s++ {
		bh := float64(perSec[s]) / maxR * 120
		bars = append(bars, bar{X: float64(s) / float64(secs) * w, Y: 120 - bh, W: w / float64(secs) * 0.8, H: bh})
	}
	data := map[string]any{"R": r, "Text": r.String(), "Waiting": line(func(s fairSampleAt) int64 { return s.Waiting }),
		"Admitted": line(func(s fairSampleAt) int64 { return s.Admitted }), "Bars": bars, "MaxY": int64(maxY), "MaxT": maxT, "MaxR": int64(maxR),
		"W": w, "H": h, "OK": len(r.Violations) == 0}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := fairTmpl.Execute(f, data); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

var fairTmpl = template.Must(template.New("fair").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>seckill loadgen — {{.R.Mode}} mode</title>
<style>body{font:14px system-ui,sans-serif;margin:2em;max-width:900px}svg{background:#fafafa;border:1px solid #ddd}
pre{background:#f4f4f4;padding:1em}.ok{color:#070}.bad{color:#b00}.k{display:inline-block;width:1em;height:.3em;margin:0 .3em .2em 1em}</style></head>
<body><h1>Fair sale: {{.R.Mode}} mode</h1>
<p>{{.R.When}} · {{.R.Users}} users · {{.R.Stock}} stock · {{.R.Conc}} connections</p>
<h2>Queue length and admissions over time</h2>
<p><span class="k" style="background:#c60"></span>waiting{{if eq .R.Mode "draw"}} (entries){{end}}
<span class="k" style="background:#06c"></span>admitted{{if eq .R.Mode "draw"}} (winners){{end}} · y: 0–{{.MaxY}} · x: 0–{{printf "%.1f" .MaxT}} s</p>
<svg width="{{.W}}" height="{{.H}}" viewBox="0 0 {{.W}} {{.H}}">
<polyline fill="none" stroke="#c60" stroke-width="2" points="{{.Waiting}}"/>
<polyline fill="none" stroke="#06c" stroke-width="2" points="{{.Admitted}}"/></svg>
<h2>Admissions per second</h2><p>y: 0–{{.MaxR}} per second</p>
<svg width="{{.W}}" height="120" viewBox="0 0 {{.W}} 120">{{range .Bars}}<rect x="{{.X}}" y="{{.Y}}" width="{{.W}}" height="{{.H}}" fill="#06c"/>{{end}}</svg>
<h2>Figures and invariants</h2>
<p class="{{if .OK}}ok{{else}}bad{{end}}">{{if .OK}}every invariant holds{{else}}VIOLATIONS{{end}}</p>
<pre>{{.Text}}</pre></body></html>
`))
