package chaos

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckillkit/seckill/examples/fullstack/crash"
	"github.com/seckillkit/seckill/examples/fullstack/history"
)

// soakKnobs are the soak's size, from the environment. SECKILL_SOAK=short
// (2 fixed seeds of 60 s; .ci/run replays one, SECKILL_SOAK_SEED=49085)
// or long (`make soak`: 3 seeds of 30 min) turns
// it on; SECKILL_SOAK_DURATION (per seed), SECKILL_SOAK_SEEDS,
// SECKILL_SOAK_SEED (replay one seed), SECKILL_SOAK_RANDOM=1 (fresh
// random seeds instead of the fixed ones), SECKILL_SOAK_USERS and
// SECKILL_SOAK_REPORT (a file for the report) shape it.
type soakKnobs struct {
	mode   string
	dur    time.Duration
	seeds  []uint64
	users  int
	report string
}

func readSoakKnobs(t *testing.T) soakKnobs {
	k := soakKnobs{mode: os.Getenv("SECKILL_SOAK"), users: 2000, report: os.Getenv("SECKILL_SOAK_REPORT")}
	n := 0
	switch k.mode {
	case "short":
		k.dur, n = 60*time.Second, 2
	case "long":
		k.dur, n = 30*time.Minute, 3
	default:
		t.Fatalf("SECKILL_SOAK=%q: want short or long", k.mode)
	}
	if v := os.Getenv("SECKILL_SOAK_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 10*time.Second {
			t.Fatalf("SECKILL_SOAK_DURATION=%q: want a duration of at least 10s", v)
		}
		k.dur = d
	}
	pos := func(name string, def int) int {
		v := os.Getenv(name)
		if v == "" {
			return def
		}
		x, err := strconv.Atoi(v)
		if err != nil || x < 1 {
			t.Fatalf("%s=%q: want a positive integer", name, v)
		}
		return x
	}
	n = pos("SECKILL_SOAK_SEEDS", n)
	k.users = pos("SECKILL_SOAK_USERS", k.users)
	if v := os.Getenv("SECKILL_SOAK_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("SECKILL_SOAK_SEED=%q: want an unsigned integer", v)
		}
		k.seeds = []uint64{s}
		return k
	}
	for i := 0; i < n; i++ {
		s := seedOf("SOAK", i)
		if os.Getenv("SECKILL_SOAK_RANDOM") == "1" {
			var b [8]byte
			_, _ = crand.Read(b[:])
			s = binary.LittleEndian.Uint64(b[:]) % 1_000_000_000
		}
		k.seeds = append(k.seeds, s)
	}
	return k
}

// soakAction is how a catalogue fault strikes and heals, with the
// battery's own helpers.
type soakAction struct{ strike, heal func(r *run) error }

// batteryFault returns the fault of the battery's scenario id.
func batteryFault(id string) fault {
	for _, sc := range scenarios() {
		if sc.id == id {
			return sc.fault
		}
	}
	panic("chaos: no scenario " + id)
}

// restartWorkerTries restarts worker i, again if its start fails (a
// worker that cannot reach a backend during startup exits).
func restartWorkerTries(i int) func(r *run) error {
	return func(r *run) error {
		var err error
		for try := 0; try < 3; try++ {
			if err = restartWorker(i)(r); err == nil {
				return nil
			}
			r.note("worker%d restart failed (try %d): %v", i+1, try+1, err)
		}
		return err
	}
}

func soakActions() map[string]soakAction {
	part := func(names ...string) soakAction {
		return soakAction{strike: partition(fixed(names...), false), heal: partition(fixed(names...), true)}
	}
	f3, f4, f5, f6, f6k, f8 := batteryFault("F3"), batteryFault("F4"), batteryFault("F5"), batteryFault("F6"), batteryFault("F6k"), batteryFault("F8")
	var dbAll []string
	for _, p := range []string{"api1", "api2", "worker1", "worker2"} {
		dbAll = append(dbAll, dbProxy(p))
	}
	return map[string]soakAction{
		"kill -9 api1":    {strike: killAPI(0), heal: restartAPI(0)},
		"kill -9 api2":    {strike: killAPI(1), heal: restartAPI(1)},
		"kill -9 worker1": {strike: killWorker(0), heal: restartWorkerTries(0)},
		"kill -9 worker2": {strike: killWorker(1), heal: restartWorkerTries(1)},
		"lagging consumer (both workers down)": {
			strike: func(r *run) error {
				if err := killWorker(0)(r); err != nil {
					return err
				}
				return killWorker(1)(r)
			},
			heal: func(r *run) error {
				if err := restartWorkerTries(0)(r); err != nil {
					return err
				}
				return restartWorkerTries(1)(r)
			}},
		"kill -9 redis-server, restarted with its AOF":               {strike: f3.strike, heal: f3.heal},
		"kill -9 redis-server, restarted EMPTY (failover with loss)": {strike: f4.strike, heal: f4.heal},
		"broker stalled (SIGSTOP + proxies disabled)":                {strike: f6.strike, heal: f6.heal},
		"kill -9 broker, restarted with its log":                     {strike: f6k.strike, heal: f6k.heal},
		"partition api1 <-> Redis":                                   part(redisProxy("api1")),
		"partition worker2 <-> Redis":                                part(redisProxy("worker2")),
		"partition api2 <-> database":                                part(dbProxy("api2")),
		"partition worker1 <-> database":                             part(dbProxy("worker1")),
		"Redis slow (200 ms) with connection resets":                 {strike: f8.strike, heal: f8.heal},
		"database down for everyone (every database proxy disabled)": part(dbAll...),
		"kill -9 mariadbd, restarted on its datadir":                 {strike: f5.strike, heal: f5.heal},
	}
}

// TestSoakPlan checks the nemesis's plan without servers: a seed always
// draws the same plan, faults overlap, two active faults never share a
// resource, every fault ends inside its round, every fault of the
// catalogue is drawn and has a strike and a heal.
func TestSoakPlan(t *testing.T) {
	cat := soakCatalogue(4*time.Second, true)
	acts := soakActions()
	for _, f := range cat {
		if a, ok := acts[f.name]; !ok || a.strike == nil || a.heal == nil {
			t.Errorf("catalogue fault %q has no strike and heal", f.name)
		}
		if f.weight < 1 || f.minHold <= 0 || f.maxHold < f.minHold || len(f.uses) == 0 {
			t.Errorf("catalogue fault %q: weight %d, hold [%v, %v], uses %v", f.name, f.weight, f.minHold, f.maxHold, f.uses)
		}
	}
	const d = 5 * time.Minute
	drawn := map[int]int{}
	for i := 0; i < 5; i++ {
		seed := seedOf("SOAK", i)
		p := nemesisPlan(seed, 0, d, 3*time.Second, cat)
		if q := nemesisPlan(seed, 0, d, 3*time.Second, cat); !slices.Equal(p, q) {
			t.Fatalf("seed %d: two plans differ", seed)
		}
		if q := nemesisPlan(seed, 1, d, 3*time.Second, cat); slices.Equal(p, q) {
			t.Errorf("seed %d: rounds 0 and 1 drew the same plan", seed)
		}
		if len(p) < 20 {
			t.Errorf("seed %d: %d faults in %v", seed, len(p), d)
		}
		pairs, most := planOverlaps(p)
		if pairs == 0 || most < 2 {
			t.Errorf("seed %d: no overlap (%d pairs, at most %d at once)", seed, pairs, most)
		}
		for a, x := range p {
			drawn[x.fault]++
			if x.end() > d || x.hold < cat[x.fault].minHold || x.hold > cat[x.fault].maxHold {
				t.Errorf("seed %d: %q at %v held %v: outside the round or its bounds", seed, cat[x.fault].name, x.at, x.hold)
			}
			if a > 0 && x.at < p[a-1].at {
				t.Errorf("seed %d: plan not in time order", seed)
			}
			for _, y := range p[a+1:] {
				if x.at < y.end() && y.at < x.end() {
					for _, u := range cat[x.fault].uses {
						if slices.Contains(cat[y.fault].uses, u) {
							t.Errorf("seed %d: %q and %q overlap on %s", seed, cat[x.fault].name, cat[y.fault].name, u)
						}
					}
				}
			}
		}
	}
	for i, f := range cat {
		if drawn[i] == 0 {
			t.Errorf("%q never drawn in 5 plans of %v", f.name, d)
		}
	}
}

// soakStats are one seed's figures.
type soakStats struct {
	seed                         uint64
	dur                          time.Duration
	rounds                       int
	faults                       map[string]int
	overlapped, mostAtOnce       int // strikes while another fault was active; most faults active at once
	postponed, skipped           int // heals that waited for a backend; strikes whose resource was still held
	buyerSessions, buyAnswers    int
	accepted, orders, paid, fail int
	histories, answers           int
	viol                         []string
	took                         time.Duration
}

// nemesis runs plan on the test's goroutine: each strike at its time, its
// heal after its hold, a heal waiting while a fault holding one of the
// backends it needs is active; a strike whose resource is still held (a
// heal waited) is skipped.
func (r *run) nemesis(cat []nemesisFault, acts map[string]soakAction, plan []nemesisStep, st *soakStats) {
	type ev struct {
		at   time.Time
		step int
		heal bool
	}
	t0 := time.Now()
	var q []ev
	for i, s := range plan {
		q = append(q, ev{at: t0.Add(s.at), step: i})
	}
	active := map[int]bool{}
	held := func(except int) map[string]bool {
		h := map[string]bool{}
		for i := range active {
			if i != except {
				for _, u := range cat[plan[i].fault].uses {
					h[u] = true
				}
			}
		}
		return h
	}
	for len(q) > 0 {
		sort.SliceStable(q, func(i, j int) bool { return q[i].at.Before(q[j].at) })
		e := q[0]
		q = q[1:]
		if d := time.Until(e.at); d > 0 {
			tm := time.NewTimer(d) // the plan's schedule, not a synchronisation
			select {
			case <-tm.C:
			case <-r.ctx.Done():
				tm.Stop()
			}
		}
		f := cat[plan[e.step].fault]
		a := acts[f.name]
		if !e.heal {
			h := held(-1)
			if slices.ContainsFunc(f.uses, func(u string) bool { return h[u] }) || r.ctx.Err() != nil {
				st.skipped++
				r.note("nemesis: %s skipped: its resource is still held", f.name)
				continue
			}
			if len(active) > 0 {
				st.overlapped++
			}
			r.note("nemesis: STRIKE %s (hold %v; %d other faults active)", f.name, plan[e.step].hold, len(active))
			if err := a.strike(r); err != nil {
				r.violation("nemesis: strike %s: %v", f.name, err)
			}
			active[e.step] = true
			st.mostAtOnce = max(st.mostAtOnce, len(active))
			st.faults[f.name]++
			r.count("fault "+f.name, 1)
			q = append(q, ev{at: time.Now().Add(plan[e.step].hold), step: e.step, heal: true})
			continue
		}
		h := held(e.step)
		if slices.ContainsFunc(f.needs, func(u string) bool { return h[u] }) && r.ctx.Err() == nil {
			st.postponed++
			q = append(q, ev{at: time.Now().Add(500 * time.Millisecond), step: e.step, heal: true})
			continue
		}
		r.note("nemesis: HEAL %s", f.name)
		if err := a.heal(r); err != nil {
			r.violation("nemesis: heal %s: %v", f.name, err)
		}
		delete(active, e.step)
	}
}

// soakLoad drives every crowd in waves of batch buyers (a seeded pick of
// its users) until stop is set; the wave under way ends on its own (its
// buyers' tries are bounded), so no answer is cut off. wait returns the
// buyers driven and why they stopped.
func (r *run) soakLoad(users [][]int64, batch int, stop *atomic.Bool) (wait func() (int, map[string]int)) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	sessions, stops := 0, map[string]int{}
	for i, c := range r.crowds {
		rng := rand.New(rand.NewPCG(r.seed, uint64(i)<<32+uint64(r.rng.Uint32())))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() && r.ctx.Err() == nil {
				us := users[i]
				var pick []int64
				for _, j := range rng.Perm(len(us))[:min(batch, len(us))] {
					pick = append(pick, us[j])
				}
				m := c.Wave(r.ctx, pick, crash.WaveOptions{Tries: 8, Ramp: arrival})
				mu.Lock()
				sessions += len(pick)
				for k, n := range m {
					stops[k] += n
				}
				mu.Unlock()
			}
		}()
	}
	return func() (int, map[string]int) { wg.Wait(); return sessions, stops }
}

// peekNew reads /api/result of every accepted reservation not read
// before (recorded in the history) and keeps the final answers, as
// peekResults does for the battery.
func (r *run) peekNew(read map[string]bool) {
	for id, u := range r.accepted() {
		if read[id] {
			continue
		}
		read[id] = true
		a := r.agentFor(u, 0).result(r.ctx, id)
		if a.Code == http.StatusOK && a.Status != "queued" && a.Status != "unknown" {
			r.seen[id] = a.Status
		}
	}
}

// TestSoak is the randomized soak: per seed, the battery's chain (2 apis,
// api2's clock 3 s ahead; 2 workers; redis-server with AOF; the broker; a
// private mariadbd when installed) under continuous load while the
// nemesis strikes faults of the catalogue on a seeded schedule with
// overlaps. The run is cut in rounds; at the end of each (every fault
// healed, the load stopped) the stores settle, every third CREATED order
// is paid, and every invariant and every buyer's history is checked;
// after the last round, the battery's full check on the quiescent state.
func TestSoak(t *testing.T) {
	if os.Getenv("SECKILL_SOAK") == "" {
		t.Skip("the soak runs with SECKILL_SOAK=short (CI) or long (make soak)")
	}
	if testing.Short() {
		t.Skip("the soak: real processes for minutes, not run with -short")
	}
	dsn := os.Getenv("SECKILL_MYSQL_DSN")
	if dsn == "" {
		t.Skip("SECKILL_MYSQL_DSN not set: the soak runs the chain on MariaDB")
	}
	if _, err := execLook("redis-server"); err != nil {
		t.Skip("redis-server not on PATH: the soak runs its own Redis")
	}
	k := readSoakKnobs(t)
	var all []soakStats
	for _, seed := range k.seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Logf("soak seed %d, %v: replay with SECKILL_SOAK=%s SECKILL_SOAK_DURATION=%v SECKILL_SOAK_SEED=%d", seed, k.dur, k.mode, k.dur, seed)
			st := runSoak(t, dsn, k, seed)
			all = append(all, st)
		})
	}
	report := renderSoak(k, all)
	t.Log("\n" + report)
	if k.report != "" {
		if err := os.WriteFile(k.report, []byte(report), 0o644); err != nil {
			t.Errorf("write %s: %v", k.report, err)
		}
	}
}

func runSoak(t *testing.T, dsn string, k soakKnobs, seed uint64) soakStats {
	start := time.Now()
	st := soakStats{seed: seed, dur: k.dur, faults: map[string]int{}}
	ctx, cancel := context.WithTimeout(context.Background(), k.dur+20*time.Minute)
	t.Cleanup(cancel)
	privateDB := needMariaDB() == ""
	grace := 4 * time.Second
	cfg := sysConfig{apis: 2, workers: 2, stock: 300, users: k.users,
		payTimeout: 4 * time.Second, grace: grace, privateDB: privateDB,
		extra:     []string{"-duration", (k.dur + 2*time.Hour).String()},
		procExtra: map[string][]string{"api2": {"-clock-skew", "3s"}}}
	r := &run{t: t, ctx: ctx, name: "SOAK", seed: seed, rng: rand.New(rand.NewPCG(seed, 0x50a4)),
		counts: map[string]int{}, extra: map[string]int64{}, seen: map[string]string{},
		hc: &http.Client{Timeout: 20 * time.Second}, rec: history.NewRecorder()}
	t.Cleanup(r.hc.CloseIdleConnections)
	r.sys = startSystem(t, dsn, cfg)
	for i, a := range r.sys.apis {
		c := crash.NewCrowd(a.URL, k.users, seed*4+uint64(i))
		c.History = r.rec
		t.Cleanup(c.Close)
		c.SetPhase("soak")
		r.crowds = append(r.crowds, c)
	}
	r.start = time.Now()
	cat := soakCatalogue(grace, privateDB)
	acts := soakActions()
	// Rounds of about 5 minutes (at least 2), each ending in a checkpoint.
	st.rounds = max(2, int((k.dur+150*time.Second)/(5*time.Minute)))
	roundLen := k.dur / time.Duration(st.rounds)
	users := r.crowdUsers(k.users)
	read := map[string]bool{}
	stops := map[string]int{}
	for round := 0; round < st.rounds && ctx.Err() == nil; round++ {
		plan := nemesisPlan(seed, round, roundLen, 3*time.Second, cat)
		pairs, most := planOverlaps(plan)
		r.note("round %d/%d: %v, %d faults planned (%d overlapping pairs, up to %d at once), load on", round+1, st.rounds, roundLen, len(plan), pairs, most)
		var stop atomic.Bool
		wait := r.soakLoad(users, 150, &stop)
		r.nemesis(cat, acts, plan, &st)
		stop.Store(true)
		n, m := wait()
		st.buyerSessions += n
		for key, v := range m {
			stops[key] += v
		}
		r.note("round %d: every fault healed, load stopped: %d buyer sessions: %s", round+1, n, crash.FormatCounts(m))
		s := r.settle(fmt.Sprintf("checkpoint %d", round+1))
		r.peekNew(read)
		if round == st.rounds-1 {
			break // the last checkpoint is the full check below
		}
		// Quiet: every third CREATED order paid, the others cancelled by
		// the canceller, the stores settled. The checker reads SQL, then
		// Redis: only a quiescent state is one snapshot (while the
		// canceller works, an order read CREATED can be released in
		// Redis before Redis is read). The stores are read after the
		// answers: a later state may only follow from them.
		r.pay(s)
		s = r.quiesce(cfg.payTimeout)
		for _, v := range s.Violations() {
			r.violation("checkpoint %d: %s", round+1, v)
		}
		v := history.Check(r.rec.Ops(), s.Truth())
		for _, x := range v.Violations {
			r.violation("checkpoint %d: history %s", round+1, x)
		}
		r.note("checkpoint %d: %d accepted, %d orders; invariants and buyer histories: %s", round+1, len(r.accepted()), len(s.Orders), v)
	}
	s := r.settle("after the last round")
	r.pay(s)
	s = r.quiesce(cfg.payTimeout)
	r.check(s)
	r.count("alerts", r.sys.serviceLogCount("ALERT"))
	for _, c := range r.crowds {
		for key, n := range c.Tally("soak") {
			if strings.HasPrefix(key, "buy ") {
				st.buyAnswers += n
			}
		}
	}
	st.accepted, st.orders, st.paid, st.fail = r.counts["accepted"], r.counts["orders"], r.counts["paid"], r.counts["failed"]
	st.histories, st.answers = r.counts["histories checked"], r.counts["history answers"]
	st.viol, st.took = r.viol, time.Since(start).Round(time.Second)
	r.note("soak seed %d done: buyers stopped: %s; %d faults (%d struck while another was active, up to %d at once, %d heals waited for a backend, %d strikes skipped); %d violations; %d ALERT lines",
		seed, crash.FormatCounts(stops), sum(st.faults), st.overlapped, st.mostAtOnce, st.postponed, st.skipped, len(r.viol), r.counts["alerts"])
	return st
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func renderSoak(k soakKnobs, all []soakStats) string {
	var b strings.Builder
	fmt.Fprintf(&b, "soak: SECKILL_SOAK=%s, %v per seed, %d users, %s\n\n", k.mode, k.dur, k.users, time.Now().UTC().Format(time.RFC3339))
	fmt.Fprintln(&b, "| seed | load | rounds | faults | struck during another | most at once | buyer sessions | buy answers | accepted | orders | paid | FAILED | histories | answers checked | violations | took |")
	fmt.Fprintln(&b, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	faults := map[string]int{}
	for _, s := range all {
		fmt.Fprintf(&b, "| %d | %v | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %v |\n", s.seed, s.dur, s.rounds, sum(s.faults),
			s.overlapped, s.mostAtOnce, s.buyerSessions, s.buyAnswers, s.accepted, s.orders, s.paid, s.fail, s.histories, s.answers, len(s.viol), s.took)
		for f, n := range s.faults {
			faults[f] += n
		}
	}
	var names []string
	for f := range faults {
		names = append(names, f)
	}
	sort.Strings(names)
	fmt.Fprintln(&b, "\nfaults injected, all seeds:")
	for _, f := range names {
		fmt.Fprintf(&b, "  %4d  %s\n", faults[f], f)
	}
	for _, s := range all {
		for _, v := range s.viol {
			fmt.Fprintf(&b, "VIOLATION (seed %d): %s\n", s.seed, v)
		}
	}
	return b.String()
}
