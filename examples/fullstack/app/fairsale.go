package app

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/seckillkit/seckill/checkout"
	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/waitroom"
	"github.com/seckillkit/seckill/waitroom/draw"
)

// The fair sale modes (#26): the sale is first come, first served by
// default (-sale-mode fcfs: nothing of this file runs, no route, no
// metric, no Redis key); -sale-mode queue puts a waiting room
// (waitroom.Room) in front of the access token, -sale-mode draw a draw
// (waitroom/draw) whose winners alone may take one.
//
// The gate is the access-token step (POST /api/activity/token), not
// checkout: the buy needs the access token, the pool hands out one per
// buyer, so a buyer refused the token cannot buy. Queue mode: the token
// step verifies the admission pass (header X-Queue-Pass, waitroom.Verify)
// and, once the token is taken, calls Done (the pass is spent; a replay is
// refused; the cap counts admitted users who have not taken their token
// yet). Draw mode: the token step wants Outcome == Winner, and one checkout
// step (fair_draw, before the token step) asks again at the buy, so a
// winner replaced for not buying in time cannot buy with a token taken
// before.
//
// Seed: with the admin API on, the operator commits (seckillctl queue
// commit) and reveals it (seckillctl queue start); without it the app
// commits itself to a seed derived from the secret and reveals it at the
// start (the quick start, the tests).

// Sale modes (Config.SaleMode).
const (
	SaleFCFS  = "fcfs"
	SaleQueue = "queue"
	SaleDraw  = "draw"
)

// queueTick is how often every instance calls Admit (the rate is shared in
// Redis, so every instance calls it; one dead instance changes nothing).
const queueTick = 100 * time.Millisecond

// registerFairFlags binds the fair-sale flags (RegisterFlags).
func (c *Config) registerFairFlags(fs *flag.FlagSet) {
	if v := os.Getenv("SECKILL_SALE_MODE"); v != "" {
		c.SaleMode = v
	}
	fs.StringVar(&c.SaleMode, "sale-mode", c.SaleMode, "how the sale is allotted: fcfs (first come, first served), queue (a waiting room admits at -queue-rate) or draw (entries until the start, then a draw) (env SECKILL_SALE_MODE)")
	if v, err := strconv.ParseFloat(os.Getenv("SECKILL_QUEUE_RATE"), 64); err == nil {
		c.QueueRate = v
	}
	fs.Float64Var(&c.QueueRate, "queue-rate", c.QueueRate, "queue mode: users admitted per second, summed over every instance (0: only -queue-cap) (env SECKILL_QUEUE_RATE)")
	if v, err := strconv.ParseInt(os.Getenv("SECKILL_QUEUE_CAP"), 10, 64); err == nil {
		c.QueueCap = v
	}
	fs.Int64Var(&c.QueueCap, "queue-cap", c.QueueCap, "queue mode: most users admitted who have not taken their access token yet (0: no cap) (env SECKILL_QUEUE_CAP)")
	if v, err := time.ParseDuration(os.Getenv("SECKILL_DRAW_DEADLINE")); err == nil {
		c.DrawDeadline = v
	}
	fs.DurationVar(&c.DrawDeadline, "draw-deadline", c.DrawDeadline, "draw mode: a winner who has no live order this long after winning is replaced from the waitlist (env SECKILL_DRAW_DEADLINE)")
}

// fairErr validates the fair-sale settings.
func (c *Config) fairErr() error {
	switch {
	case c.SaleMode != "" && c.SaleMode != SaleFCFS && c.SaleMode != SaleQueue && c.SaleMode != SaleDraw:
		return fmt.Errorf("sale-mode must be fcfs, queue or draw, got %q", c.SaleMode)
	case c.SaleMode == SaleQueue && (c.QueueRate < 0 || c.QueueCap < 0 || (c.QueueRate == 0 && c.QueueCap == 0)):
		return fmt.Errorf("queue mode wants -queue-rate > 0 and/or -queue-cap > 0, got %v and %d", c.QueueRate, c.QueueCap)
	case c.SaleMode == SaleDraw && c.DrawDeadline <= 0:
		return fmt.Errorf("draw-deadline must be positive, got %v", c.DrawDeadline)
	}
	return nil
}

// fair is the sale's fair mode: nil in fcfs mode.
type fair struct {
	mode   string
	sale   string
	room   *waitroom.Room // queue mode
	drawer *draw.Drawer   // draw mode
	rdb    redis.UniversalClient
	app    string // the app's own hash of the sale: seed, drawn_at, due:<user>
	alog   string // queue mode: the admission log, one entry per Admit batch
	pq     string // queue mode: the room's placed pre-queue (popped by Admit)
	pqcopy string // queue mode: its copy, the published order (snapshot)
	meta   string // queue mode: the room's settings (their loss: roomKept)
	seen   atomic.Bool
	auto   []byte // the seed the app commits to itself (admin API off), else nil

	mu    sync.Mutex
	order []string // draw mode: the draw order, once drawn
	drawn time.Time

	waiting, admitted, active, rate prometheus.Gauge
	admits, replaced                prometheus.Counter
	admitsN                         atomic.Int64 // admits, for the tests
}

// buildFair builds the fair mode's parts and workers (no I/O).
func (a *App) buildFair() error {
	mode := a.cfg.SaleMode
	if mode == "" || mode == SaleFCFS {
		return nil
	}
	f := &fair{mode: mode, sale: a.sale.key, rdb: a.in.Redis}
	m := hmac.New(sha256.New, a.p.ticketKey)
	m.Write([]byte("seckill waitroom keys v1"))
	key := m.Sum(nil)
	if a.cfg.AdminToken == "" {
		s := hmac.New(sha256.New, a.p.ticketKey)
		s.Write([]byte("seckill fair seed v1:" + a.sale.key))
		f.auto = s.Sum(nil)
	}
	var err error
	switch mode {
	case SaleQueue:
		if f.room, err = waitroom.New(a.in.Redis, []waitroom.Key{{ID: "k1", Secret: key}},
			waitroom.WithKeyPrefix(a.cfg.KeyPrefix), waitroom.WithObserver(a.p.obs)); err != nil {
			return err
		}
		f.app = a.cfg.KeyPrefix + "{wr:" + f.sale + "}:app"
		f.alog = a.cfg.KeyPrefix + "{wr:" + f.sale + "}:alog"
		f.pq = a.cfg.KeyPrefix + "{wr:" + f.sale + "}:pq"
		f.pqcopy = a.cfg.KeyPrefix + "{wr:" + f.sale + "}:pqorder"
		f.meta = a.cfg.KeyPrefix + "{wr:" + f.sale + "}:meta"
	case SaleDraw:
		if f.drawer, err = draw.New(a.in.Redis, draw.WithKeyPrefix(a.cfg.KeyPrefix)); err != nil {
			return err
		}
		f.app = a.cfg.KeyPrefix + "{dr:" + f.sale + "}:app"
	}
	g := func(name, help string) prometheus.Gauge {
		x := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
		a.m.reg.MustRegister(x)
		return x
	}
	f.waiting = g("seckill_fair_waiting", "Fair sale: users waiting in the queue (queue mode) or entries (draw mode).")
	f.admitted = g("seckill_fair_admitted", "Fair sale: users admitted so far (queue mode) or winners drawn (draw mode).")
	f.active = g("seckill_fair_active", "Queue mode: admitted users who have not taken their access token yet.")
	f.rate = g("seckill_fair_rate", "Queue mode: the admission rate set, users per second (all instances).")
	f.admits = prometheus.NewCounter(prometheus.CounterOpts{Name: "seckill_fair_admissions_total", Help: "Queue mode: users admitted by this instance's Admit calls."})
	f.replaced = prometheus.NewCounter(prometheus.CounterOpts{Name: "seckill_fair_replaced_total", Help: "Draw mode: unpaid winners replaced by this instance."})
	a.m.reg.MustRegister(f.admits, f.replaced)
	a.p.fair, a.p.fairChain = f, fairChain()
	switch mode {
	case SaleQueue:
		a.run.add(worker{name: "waitroom", start: a.fairSetup, run: every(queueTick, a.queueTick)})
	case SaleDraw:
		a.run.add(worker{name: "draw", start: a.fairSetup, run: every(500*time.Millisecond, a.drawTick)})
	}
	a.run.add(worker{name: "fair_stats", run: every(time.Second, a.fairGauges)})
	return nil
}

// fairSetup commits to the app's own seed when the admin API is off. The
// first process to start keeps its seed in Redis (HSETNX) and every
// process, a restart too, commits to that one: the commitment is the same
// whoever starts first, with or without a shared secret.
func (a *App) fairSetup(ctx context.Context) error {
	f := a.p.fair
	if f.auto == nil {
		return nil
	}
	if err := f.rdb.HSetNX(ctx, f.app, "seed", hex.EncodeToString(f.auto)).Err(); err != nil {
		return err
	}
	seed, err := f.seed(ctx)
	if err != nil {
		return err
	}
	return a.fairCommit(ctx, waitroom.Commit(seed))
}

// fairCommit sets the commitment (admin: queue commit).
func (a *App) fairCommit(ctx context.Context, commitment string) error {
	f := a.p.fair
	if f.room != nil {
		return f.room.Configure(ctx, f.sale, waitroom.Config{Start: a.sale.act.Start, Commitment: commitment,
			Rate: a.cfg.QueueRate, MaxActive: a.cfg.QueueCap})
	}
	return f.drawer.Open(ctx, f.sale, commitment)
}

// seed is the revealed seed, or nil while the operator has not revealed it.
func (f *fair) seed(ctx context.Context) ([]byte, error) {
	s, err := f.rdb.HGet(ctx, f.app, "seed").Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return hex.DecodeString(s)
}

// queueTick places the pre-queue once the sale started (Start is
// resumable and idempotent), then admits what the shared allowance allows
// and logs the batch.
func (a *App) queueTick(ctx context.Context) {
	f := a.p.fair
	if time.Now().Before(a.sale.act.Start) {
		return
	}
	if !a.roomKept(ctx) {
		return
	}
	st, err := f.room.Stats(ctx, f.sale)
	if err != nil {
		a.fairWarn(ctx, "waitroom stats", err)
		return
	}
	if !st.Placed {
		seed, err := f.seed(ctx)
		if err != nil || seed == nil {
			a.fairWarn(ctx, "waitroom seed", err)
			return
		}
		if err := f.room.Start(ctx, f.sale, seed); err != nil {
			a.fairWarn(ctx, "waitroom start", err)
			return
		}
	}
	if ok, err := f.snapshot(ctx); !ok {
		a.fairWarn(ctx, "waitroom snapshot", err)
		return
	}
	users, err := f.room.Admit(ctx, f.sale, 1000)
	if err != nil {
		a.fairWarn(ctx, "waitroom admit", err)
		return
	}
	if len(users) == 0 {
		return
	}
	a.p.fairKicks.kick(users)
	f.admits.Add(float64(len(users)))
	f.admitsN.Add(int64(len(users)))
	// The admission log (loadgen's and the fault battery's checks): one
	// entry per batch, the users in admission order. Written after the
	// batch; an instance killed between the two leaves that batch out
	// of the log, never a user twice in it.
	if err := f.rdb.RPush(ctx, f.alog, strings.Join(users, ",")).Err(); err != nil {
		a.fairWarn(ctx, "waitroom log", err)
	}
}

// roomKept reports whether the room is in Redis, and rebuilds it when
// Redis lost it (a restart without its data, a failover to a replica that
// had nothing): the room's settings, entries and admissions are gone, and
// so is the app's seed. With the app's own seed (no admin API) it is
// committed to again — the same seed, derived from the secret, so the
// same commitment — and the room configured again; the sale has started,
// so the rebuilt room's pre-queue is empty and every rejoin is placed
// first in, first out. Every user who lost their place is told at their
// next poll (the ticket's entry is gone: 403 "queue", join again; the
// stream says "rejoin") and a pass given before no longer verifies. With
// the operator's seed the commitment cannot be made again without them:
// the room stays down (joins answer 503) and an ALERT asks for "queue
// commit" and "queue start" again.
func (a *App) roomKept(ctx context.Context) bool {
	f := a.p.fair
	n, err := f.rdb.Exists(ctx, f.meta).Result()
	switch {
	case err != nil:
		a.fairWarn(ctx, "waitroom meta", err)
		return false
	case n == 1:
		f.seen.Store(true)
		return true
	case !f.seen.Load():
		return false // not configured yet (the operator has not committed)
	case f.auto == nil:
		a.log.Error("ALERT: the waiting room was lost with Redis's data: commit to a seed and start again (seckillctl queue commit / start); joins are refused until then", "activity", f.sale)
		return false
	}
	if err := a.fairSetup(ctx); err != nil {
		a.fairWarn(ctx, "waitroom rebuild", err)
		return false
	}
	a.log.Warn("the waiting room was lost with Redis's data: rebuilt; its users are told to join again", "activity", f.sale)
	return true
}

// snapSet keeps the placed pre-queue, once, before anyone is admitted
// (Admit pops the room's own list): KEYS app hash, the copy; ARGV the
// order. A copy read after another instance's copy was set (and admission
// began) is dropped.
var snapSet = redis.NewScript(`
if redis.call('HEXISTS', KEYS[1], 'snap') == 1 then return 0 end
redis.call('DEL', KEYS[2])
for i = 1, #ARGV, 1000 do redis.call('RPUSH', KEYS[2], unpack(ARGV, i, math.min(i + 999, #ARGV))) end
redis.call('HSET', KEYS[1], 'snap', #ARGV)
return 1`)

// snapshot copies the placed pre-queue (the published order) before the
// first admission; every instance admits only once it is set.
func (f *fair) snapshot(ctx context.Context) (bool, error) {
	n, err := f.rdb.HExists(ctx, f.app, "snap").Result()
	if err != nil || n {
		return n, err
	}
	order, err := f.rdb.LRange(ctx, f.pq, 0, -1).Result()
	if err != nil {
		return false, err
	}
	args := make([]any, len(order))
	for i, u := range order {
		args[i] = u
	}
	if err := snapSet.Run(ctx, f.rdb, []string{f.app, f.pqcopy}, args...).Err(); err != nil {
		return false, err
	}
	return true, nil
}

// drawTick draws once the sale started and the seed is revealed, then
// replaces the winners who have no live order past their deadline.
func (a *App) drawTick(ctx context.Context) {
	f := a.p.fair
	if time.Now().Before(a.sale.act.Start) {
		return
	}
	f.mu.Lock()
	drawn := f.order
	f.mu.Unlock()
	if drawn == nil {
		seed, err := f.seed(ctx)
		if err != nil || seed == nil {
			a.fairWarn(ctx, "draw seed", err)
			return
		}
		if _, err := f.drawer.Close(ctx, f.sale); err != nil {
			a.fairWarn(ctx, "draw close", err)
			return
		}
		n := int(a.sale.act.Stock)
		if drawn, err = f.drawer.Draw(ctx, draw.Params{Sale: f.sale, Seed: seed, Stock: n, Waitlist: n}); err != nil {
			a.fairWarn(ctx, "draw", err)
			return
		}
		now := time.Now()
		_ = f.rdb.HSetNX(ctx, f.app, "drawn_at", now.UnixMilli()).Err()
		f.mu.Lock()
		f.order, f.drawn = drawn, now
		f.mu.Unlock()
		defer a.p.fairKicks.kick(nil) // the outcomes, with the winners' deadlines
	}
	a.replaceUnpaid(ctx, drawn)
}

// replaceUnpaid replaces every winner whose deadline (DrawDeadline after
// they became a winner) passed while they hold nothing in the sale's stock
// (stock.Held: no reservation in flight, no order): a winner who never
// bought, or whose unpaid order the canceller cancelled at its pay timeout
// (which released the unit). Replace is idempotent, so every instance may
// run this. Once the draw is final (drawSettle, fairpush.go) nothing is
// replaced any more.
func (a *App) replaceUnpaid(ctx context.Context, drawn []string) {
	f := a.p.fair
	top := min(len(drawn), 2*int(a.sale.act.Stock))
	now := time.Now()
	var winners []string
	waitlisted := 0
	for _, u := range drawn[:top] {
		o, err := f.drawer.Outcome(ctx, f.sale, u)
		if err != nil {
			a.fairWarn(ctx, "draw outcome", err)
			return
		}
		switch o.Status {
		case draw.Winner:
			winners = append(winners, u)
		case draw.Waitlisted:
			waitlisted++
		}
	}
	// Every winner's pay deadline first (the page shows it), then the
	// final mark, then the replacements.
	for _, u := range winners {
		if err := f.rdb.HSetNX(ctx, f.app, "due:"+u, now.Add(a.cfg.DrawDeadline).UnixMilli()).Err(); err != nil {
			a.fairWarn(ctx, "draw due", err)
			return
		}
	}
	if fin, err := a.drawSettle(ctx, winners, waitlisted); err != nil || fin {
		a.fairWarn(ctx, "draw final", err)
		return
	}
	for _, u := range winners {
		due, err := f.rdb.HGet(ctx, f.app, "due:"+u).Int64()
		if err != nil || now.UnixMilli() < due {
			continue
		}
		held, err := a.p.stock.Held(ctx, a.sale.act.ID, u)
		if err != nil || held > 0 {
			continue
		}
		repl, err := f.drawer.Replace(ctx, f.sale, u)
		if err != nil {
			a.fairWarn(ctx, "draw replace", err)
			continue
		}
		f.replaced.Inc()
		a.p.fairKicks.kick([]string{u, repl}) // the replaced user and the promoted one (waitlist positions move: the streams' tick)
	}
}

func (a *App) fairWarn(ctx context.Context, what string, err error) {
	if err != nil && ctx.Err() == nil {
		a.log.Warn(what, "err", err)
	}
}

// fairGauges refreshes the gauges.
func (a *App) fairGauges(ctx context.Context) {
	st, err := a.fairStats(ctx)
	if err != nil {
		return
	}
	f := a.p.fair
	f.waiting.Set(float64(st.Waiting))
	f.admitted.Set(float64(st.Admitted))
	f.active.Set(float64(st.Active))
	f.rate.Set(st.Rate)
}

// FairStats is the operator's view of the fair mode (admin API, seckillctl
// queue stats).
type FairStats struct {
	Mode       string  `json:"mode"`
	Activity   string  `json:"activity"`
	Waiting    int64   `json:"waiting"`  // queue: not yet admitted; draw: entries
	PreQueue   int64   `json:"prequeue"` // queue: joined before the start
	Placed     bool    `json:"placed"`   // queue: pre-queue shuffled; draw: drawn
	Admitted   int64   `json:"admitted"` // queue: admitted; draw: winners
	Active     int64   `json:"active"`
	Abandoned  int64   `json:"abandoned"`
	Rate       float64 `json:"rate"`
	MaxActive  int64   `json:"max_active"`
	Paused     bool    `json:"paused"`
	Revealed   bool    `json:"revealed"`
	Commitment string  `json:"commitment,omitempty"`
}

// FairStats reads the fair sale's figures (admin: queue stats); it fails
// in fcfs mode.
func (a *App) FairStats(ctx context.Context) (FairStats, error) {
	if a.p.fair == nil {
		return FairStats{}, errors.New("not a fair sale (-sale-mode fcfs)")
	}
	return a.fairStats(ctx)
}

// FairPublished reads the fair sale's published record (admin: queue
// published); it fails in fcfs mode.
func (a *App) FairPublished(ctx context.Context) (Published, error) {
	if a.p.fair == nil {
		return Published{}, errors.New("not a fair sale (-sale-mode fcfs)")
	}
	return a.fairPublished(ctx)
}

func (a *App) fairStats(ctx context.Context) (FairStats, error) {
	f := a.p.fair
	out := FairStats{Mode: f.mode, Activity: f.sale}
	seed, err := f.seed(ctx)
	if err != nil {
		return out, err
	}
	out.Revealed = seed != nil
	if f.room != nil {
		st, err := f.room.Stats(ctx, f.sale)
		if err != nil {
			return out, err
		}
		out.Waiting, out.PreQueue, out.Placed, out.Admitted, out.Active = st.Waiting, st.PreQueue, st.Placed, st.Admitted, st.Active
		out.Abandoned, out.Rate, out.MaxActive, out.Paused = st.Abandoned, st.Rate, st.MaxActive, st.Paused
		out.Commitment, _ = f.rdb.HGet(ctx, a.cfg.KeyPrefix+"{wr:"+f.sale+"}:meta", "commit").Result()
		return out, nil
	}
	n, err := f.rdb.HLen(ctx, a.cfg.KeyPrefix+"{dr:"+f.sale+"}:ent").Result()
	if err != nil {
		return out, err
	}
	out.Waiting = n
	out.Commitment, _ = f.rdb.HGet(ctx, a.cfg.KeyPrefix+"{dr:"+f.sale+"}:meta", "commit").Result()
	f.mu.Lock()
	out.Placed = f.order != nil
	if f.order != nil {
		out.Admitted = int64(min(len(f.order), int(a.sale.act.Stock)))
	}
	f.mu.Unlock()
	return out, nil
}

// FairCounts are the fair mode's invariants, counted from Redis and SQL
// (Invariants.Fair): no user admitted twice (AdmittedTwice = 0, from the
// admission log), no place lost (Admitted + Waiting + Abandoned = Joined),
// and every live order's buyer was admitted (queue) or is a winner (draw):
// BuyersNotAdmitted = 0.
type FairCounts struct {
	Mode              string `json:"mode"`
	Joined            int64  `json:"joined"`   // queue: entries; draw: entries
	Admitted          int64  `json:"admitted"` // queue: admitted; draw: winners now
	Waiting           int64  `json:"waiting"`
	Abandoned         int64  `json:"abandoned"`
	Logged            int64  `json:"logged"` // queue: distinct users in the admission log
	AdmittedTwice     int64  `json:"admitted_twice"`
	BuyersNotAdmitted int64  `json:"buyers_not_admitted"`
}

// fairCounts counts the fair mode's invariants; nil in fcfs mode.
func (a *App) fairCounts(ctx context.Context, live []order.Order) (*FairCounts, error) {
	f := a.p.fair
	if f == nil {
		return nil, nil
	}
	c := &FairCounts{Mode: f.mode}
	var ent string
	if f.room != nil {
		ent = a.cfg.KeyPrefix + "{wr:" + f.sale + "}:ent"
		st, err := f.room.Stats(ctx, f.sale)
		if err != nil {
			return nil, err
		}
		c.Admitted, c.Waiting, c.Abandoned = st.Admitted, st.Waiting, st.Abandoned
		logs, err := f.rdb.LRange(ctx, f.alog, 0, -1).Result()
		if err != nil {
			return nil, err
		}
		seen := map[string]bool{}
		for _, l := range logs {
			for _, u := range strings.Split(l, ",") {
				if seen[u] {
					c.AdmittedTwice++
				}
				seen[u] = true
			}
		}
		c.Logged = int64(len(seen))
	} else {
		ent = a.cfg.KeyPrefix + "{dr:" + f.sale + "}:ent"
	}
	vals, err := f.rdb.HGetAll(ctx, ent).Result()
	if err != nil {
		return nil, err
	}
	c.Joined = int64(len(vals))
	if f.drawer != nil {
		for _, v := range vals {
			if strings.HasPrefix(v, "w") {
				c.Admitted++
			}
		}
	}
	for _, o := range live {
		v := vals[o.UserID]
		if (f.room != nil && v != "a" && v != "d") || (f.drawer != nil && !strings.HasPrefix(v, "w")) {
			c.BuyersNotAdmitted++
		}
	}
	return c, nil
}

// Published is what a fair sale publishes so anyone can check it
// (seckillctl queue verify): the commitment, the seed once revealed, the
// entries and the order. Queue mode: the pre-queue's entries and its
// order (later entries are first in, first out), and the admission log
// (Admit batches, each in admission order). Draw mode: every entry, the
// draw order and the stock (the winners are its first Stock).
type Published struct {
	Mode       string     `json:"mode"`
	Commitment string     `json:"commitment"`
	Seed       string     `json:"seed,omitempty"` // hex
	Entries    []string   `json:"entries"`
	Order      []string   `json:"order"`
	Later      []string   `json:"later,omitempty"` // queue: entries after the start still waiting, in join order
	Batches    [][]string `json:"batches,omitempty"`
	Stock      int64      `json:"stock,omitempty"`
}

// fairPublished reads the published record from Redis (the keys of the
// waitroom and draw READMEs).
func (a *App) fairPublished(ctx context.Context) (Published, error) {
	f := a.p.fair
	out := Published{Mode: f.mode, Stock: a.sale.act.Stock}
	seed, err := f.seed(ctx)
	if err != nil {
		return out, err
	}
	if seed != nil && f.placed(ctx) {
		out.Seed = hex.EncodeToString(seed) // revealed only once used
	}
	if f.room != nil {
		tag := a.cfg.KeyPrefix + "{wr:" + f.sale + "}"
		out.Commitment, _ = f.rdb.HGet(ctx, tag+":meta", "commit").Result()
		if out.Order, err = f.rdb.LRange(ctx, f.pqcopy, 0, -1).Result(); err != nil {
			return out, err
		}
		out.Entries = slices.Sorted(slices.Values(out.Order))
		if out.Later, err = f.rdb.LRange(ctx, tag+":q", 0, -1).Result(); err != nil {
			return out, err
		}
		logs, err := f.rdb.LRange(ctx, f.alog, 0, -1).Result()
		if err != nil {
			return out, err
		}
		for _, l := range logs {
			out.Batches = append(out.Batches, strings.Split(l, ","))
		}
		return out, nil
	}
	tag := a.cfg.KeyPrefix + "{dr:" + f.sale + "}"
	out.Commitment, _ = f.rdb.HGet(ctx, tag+":meta", "commit").Result()
	if out.Entries, err = f.rdb.HKeys(ctx, tag+":ent").Result(); err != nil {
		return out, err
	}
	slices.Sort(out.Entries)
	if out.Order, err = f.rdb.LRange(ctx, tag+":ord", 0, -1).Result(); err != nil {
		return out, err
	}
	return out, nil
}

// placed reports whether the seed has been used (the pre-queue placed, or
// the draw drawn).
func (f *fair) placed(ctx context.Context) bool {
	if f.room != nil {
		st, err := f.room.Stats(ctx, f.sale)
		return err == nil && st.Placed
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.order != nil
}

// tokenSteps is the token chain of this node: tokenChain in fcfs mode;
// in a fair mode the same with the "fair" step (guarded: Redis) before
// the token is taken.
func (a *App) tokenSteps() []tokenStep {
	if a.p.fair == nil {
		return tokenChain
	}
	return a.p.fairChain
}

// fairChain is tokenChain with the fair step inserted before "token".
func fairChain() []tokenStep {
	i := slices.IndexFunc(tokenChain, func(s tokenStep) bool { return s.stage == "token" })
	return slices.Insert(slices.Clone(tokenChain), i, tokenStep{stage: "fair", guarded: true, run: (*App).tokenFair})
}

// tokenFair is the fair step: in queue mode the admission pass
// (X-Queue-Pass), in draw mode a win.
func (a *App) tokenFair(ctx context.Context, t *tokenReq) verdict {
	return a.fairCheck(ctx, t.user, t.r.Header.Get("X-Queue-Pass"))
}

func (a *App) fairCheck(ctx context.Context, user, pass string) verdict {
	f := a.p.fair
	if f.room != nil {
		_, err := f.room.Verify(ctx, waitroom.Credential{Sale: f.sale, User: user, Token: pass})
		switch {
		case errors.Is(err, waitroom.ErrRefused):
			return refusal(http.StatusForbidden, "queue", "wait for your turn in the queue")
		case err != nil:
			return failure(err)
		}
		return verdict{}
	}
	o, err := f.drawer.Outcome(ctx, f.sale, user)
	switch {
	case err != nil:
		return failure(err)
	case o.Status != draw.Winner:
		return refusal(http.StatusForbidden, "not_drawn", "only the draw's winners may buy")
	}
	return verdict{}
}

// fairSteps is the fair modes' edit of the buy chain (Config.Steps, the
// composition point). Queue mode: a last step, "fair_done", after the
// reservation and the hand-off, frees the buyer's slot of the cap
// (waitroom.Done: best effort; a lapse frees it otherwise) — the pass
// is then refused, and the buyer's retries go on with the access token
// already taken. Draw mode: "fair_draw" after the per-user window asks
// again whether the buyer is a winner, so a winner replaced for not
// buying in time cannot buy with a token taken before.
func (a *App) fairSteps(steps []checkout.Step) []checkout.Step {
	f := a.p.fair
	switch {
	case f == nil:
		return steps
	case f.room != nil:
		return append(steps, checkout.Step{Name: "fair_done", Run: func(ctx context.Context, at *checkout.Attempt) checkout.Outcome {
			if err := f.room.Done(ctx, f.sale, at.User); err != nil {
				a.fairWarn(ctx, "waitroom done", err)
			}
			return checkout.Outcome{}
		}})
	}
	s := checkout.Step{Name: "fair_draw", Guarded: true, Run: func(ctx context.Context, at *checkout.Attempt) checkout.Outcome {
		o, err := f.drawer.Outcome(ctx, f.sale, at.User)
		switch {
		case err != nil:
			return checkout.Outcome{Kind: checkout.Busy, Err: err}
		case o.Status != draw.Winner:
			return checkout.Outcome{Kind: checkout.Refused, Reason: "not_drawn", Message: "only the draw's winners may buy", Final: true}
		}
		return checkout.Outcome{}
	}}
	i := slices.IndexFunc(steps, func(s checkout.Step) bool { return s.Name == checkout.StepUserLimit })
	return slices.Insert(steps, i+1, s)
}

// fairMode is the mode the page reads in /api/activity ("" in fcfs mode:
// the answer is the same as before).
func (a *App) fairMode() string {
	if a.p == nil || a.p.fair == nil {
		return ""
	}
	return a.p.fair.mode
}

// fairRoutes adds the page's fair-mode routes (none in fcfs mode).
func (a *App) fairRoutes(handle func(string, http.Handler), authed func(string, http.HandlerFunc) http.Handler) {
	f := a.p.fair
	if f != nil {
		handle("POST /api/fair/ticket", authed("fair_ticket", a.handleFairTicket))
		handle("GET /api/fair/ws", a.route("fair_ws", a.handleFairWS))
		handle("GET /api/fair/events", a.route("fair_events", a.handleFairEvents))
	}
	switch {
	case f == nil:
	case f.room != nil:
		handle("POST /api/queue/join", authed("queue_join", a.handleQueueJoin))
		handle("GET /api/queue/poll", authed("queue_poll", a.handleQueuePoll))
	default:
		handle("POST /api/draw/enter", authed("draw_enter", a.handleDrawEnter))
		handle("GET /api/draw/outcome", authed("draw_outcome", a.handleDrawOutcome))
	}
}

// queueView is the page's view of its place in the queue.
type queueView struct {
	Ticket   string    `json:"ticket,omitempty"`
	State    string    `json:"state"`
	Position int64     `json:"position"`
	ETAMs    int64     `json:"eta_ms"`
	Pass     string    `json:"pass,omitempty"`
	Expiry   time.Time `json:"expiry,omitzero"`
}

func (a *App) handleQueueJoin(w http.ResponseWriter, r *http.Request) {
	user, _ := userOf(r)
	f := a.p.fair
	if v := a.tokenRisk(r.Context(), &tokenReq{r: r, user: user}); v.done() {
		a.answerStep(w, r, "queue_join", v)
		return
	}
	ticket, err := f.room.Join(r.Context(), f.sale, user)
	switch {
	case errors.Is(err, waitroom.ErrInvalidArgument): // the room is not configured (yet, or again: roomKept)
		w.Header().Set("Retry-After", "1")
		a.refuse(w, r, "queue_join", http.StatusServiceUnavailable, "busy", "the queue is not open yet, retry shortly")
		return
	case err != nil:
		a.fail(w, r, "queue_join", err)
		return
	}
	a.writePlace(w, r, user, ticket)
}

func (a *App) handleQueuePoll(w http.ResponseWriter, r *http.Request) {
	user, _ := userOf(r)
	a.writePlace(w, r, user, r.Header.Get("X-Queue-Ticket"))
}

func (a *App) writePlace(w http.ResponseWriter, r *http.Request, user, ticket string) {
	f := a.p.fair
	p, err := f.room.Poll(r.Context(), waitroom.Credential{Sale: f.sale, User: user, Token: ticket})
	switch {
	case errors.Is(err, waitroom.ErrRefused):
		a.refuse(w, r, "queue_poll", http.StatusForbidden, "queue", "join the queue again")
		return
	case err != nil:
		a.fail(w, r, "queue_poll", err)
		return
	}
	writeJSON(w, http.StatusOK, queueView{Ticket: ticket, State: string(p.State), Position: p.Position,
		ETAMs: p.ETA.Milliseconds(), Pass: p.Pass, Expiry: p.Expiry})
}

// drawView is the page's view of its draw entry.
type drawView struct {
	Status   string    `json:"status"`
	Rank     int64     `json:"rank,omitempty"`
	Position int64     `json:"position,omitempty"`
	Deadline time.Time `json:"deadline,omitzero"` // a winner: buy (and pay) before
	// Final: no replacement can change this outcome any more ("lost" always;
	// the others once the draw is final: fairpush.go).
	Final bool `json:"final"`
}

func (a *App) handleDrawEnter(w http.ResponseWriter, r *http.Request) {
	user, _ := userOf(r)
	f := a.p.fair
	if v := a.tokenRisk(r.Context(), &tokenReq{r: r, user: user}); v.done() {
		a.answerStep(w, r, "draw_enter", v)
		return
	}
	err := f.drawer.Enter(r.Context(), f.sale, user)
	switch {
	case errors.Is(err, draw.ErrRefused):
		a.refuse(w, r, "draw_enter", http.StatusConflict, "draw_closed", "entries are closed")
		return
	case err != nil:
		a.fail(w, r, "draw_enter", err)
		return
	}
	a.handleDrawOutcome(w, r)
}

func (a *App) handleDrawOutcome(w http.ResponseWriter, r *http.Request) {
	user, _ := userOf(r)
	v, err := a.drawView(r.Context(), user)
	if err != nil {
		a.fail(w, r, "draw_outcome", err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// fairAdmin serves the fair mode's operator routes next to the admin API
// (same listener, same bearer token), under /admin/queue/{activity}/:
// GET stats, GET published, POST commit {"commitment"}, POST start
// {"seed": hex}, POST pause, POST resume (queue mode). In fcfs mode h is
// returned as it is.
func (a *App) fairAdmin(h http.Handler, auth func(*http.Request) (string, error)) http.Handler {
	f := a.p.fair
	if f == nil {
		return h
	}
	mux := http.NewServeMux()
	mux.Handle("/", h)
	op := func(fn func(w http.ResponseWriter, r *http.Request)) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if _, err := auth(r); err != nil {
				writeErr(w, http.StatusUnauthorized, "unauthorized", "bad or missing admin token")
				return
			}
			if r.PathValue("activity") != f.sale {
				writeErr(w, http.StatusNotFound, "not_found", "no fair sale "+r.PathValue("activity"))
				return
			}
			fn(w, r)
		}
	}
	p := AdminPath + "queue/{activity}/"
	mux.Handle("GET "+p+"stats", op(func(w http.ResponseWriter, r *http.Request) {
		st, err := a.fairStats(r.Context())
		if err != nil {
			writeErr(w, http.StatusServiceUnavailable, "unavailable", "redis: "+err.Error())
			return
		}
		writeJSON(w, http.StatusOK, st)
	}))
	mux.Handle("GET "+p+"published", op(func(w http.ResponseWriter, r *http.Request) {
		pub, err := a.fairPublished(r.Context())
		if err != nil {
			writeErr(w, http.StatusServiceUnavailable, "unavailable", "redis: "+err.Error())
			return
		}
		writeJSON(w, http.StatusOK, pub)
	}))
	mux.Handle("POST "+p+"commit", op(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Commitment string `json:"commitment"`
		}
		if err := readJSON(r, &body); err != nil {
			writeBadBody(w, `{"commitment": hex SHA-256 of the seed}`, err)
			return
		}
		if err := a.fairCommit(r.Context(), body.Commitment); err != nil {
			a.fairAdminErr(w, err)
			return
		}
		a.log.Info("fair sale: commitment set", "activity", f.sale, "commitment", body.Commitment)
		writeJSON(w, http.StatusOK, map[string]string{"activity": f.sale, "commitment": body.Commitment})
	}))
	mux.Handle("POST "+p+"start", op(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Seed string `json:"seed"`
		}
		if err := readJSON(r, &body); err != nil {
			writeBadBody(w, `{"seed": hex}`, err)
			return
		}
		seed, err := hex.DecodeString(body.Seed)
		if err != nil || len(seed) < 16 {
			writeErr(w, http.StatusBadRequest, "bad_request", "seed: at least 16 bytes, in hex")
			return
		}
		st, err := a.fairStats(r.Context())
		switch {
		case err != nil:
			a.fairAdminErr(w, err)
			return
		case st.Commitment == "":
			writeErr(w, http.StatusConflict, "conflict", "commit to the seed first (queue commit)")
			return
		case waitroom.Commit(seed) != st.Commitment:
			writeErr(w, http.StatusBadRequest, "bad_request", "the seed does not match the commitment")
			return
		}
		// Kept until the start; the workers reveal it to Start / Draw then.
		if err := f.rdb.HSetNX(r.Context(), f.app, "seed", body.Seed).Err(); err != nil {
			a.fairAdminErr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"activity": f.sale, "revealed_at": a.sale.act.Start})
	}))
	for _, pause := range []bool{true, false} {
		name := map[bool]string{true: "pause", false: "resume"}[pause]
		mux.Handle("POST "+p+name, op(func(w http.ResponseWriter, r *http.Request) {
			if f.room == nil {
				writeErr(w, http.StatusConflict, "conflict", "pause applies to queue mode")
				return
			}
			if err := f.room.SetPaused(r.Context(), f.sale, pause); err != nil {
				a.fairAdminErr(w, err)
				return
			}
			writeJSON(w, http.StatusOK, map[string]any{"activity": f.sale, "paused": pause})
		}))
	}
	return mux
}

// fairPause pauses or resumes the queue's admission with the sale's pause
// (the admin API's pause and resume of the activity).
func (a *App) fairPause(ctx context.Context, activity string, paused bool) error {
	f := a.p.fair
	if f == nil || f.room == nil || activity != f.sale {
		return nil
	}
	return f.room.SetPaused(ctx, f.sale, paused)
}

func (a *App) fairAdminErr(w http.ResponseWriter, err error) {
	if errors.Is(err, waitroom.ErrInvalidArgument) || errors.Is(err, draw.ErrInvalidArgument) {
		writeErr(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	a.log.Warn("fair admin", "err", err)
	writeErr(w, http.StatusServiceUnavailable, "unavailable", "try again")
}
