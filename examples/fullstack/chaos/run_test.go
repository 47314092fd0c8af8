package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckillkit/seckill/examples/fullstack/crash"
	"github.com/seckillkit/seckill/examples/fullstack/history"
	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/outbox"
)

// The bounds are limits for a loaded 2-core machine, not expectations:
// every wait ends as soon as its condition holds.
const (
	reconcileEvery = time.Second
	settleBound    = 2 * time.Minute
	waveTries      = 30
	arrival        = 3 * time.Second // the buyers arrive over this long
	probeMax       = 25              // buyers probed for a lock-out per run
	sweepMax       = 300             // buyers of the sweep after the fault
)

// event is one line of a run's fault timeline.
type event struct {
	at   time.Duration // since the wave started
	what string
}

// fault is a scenario's fault: strike at the seeded k-th buy request,
// hold for the seeded window, heal. Either may be nil.
type fault struct {
	strike func(r *run) error
	heal   func(r *run) error
	// window is the seeded hold between strike and heal.
	window func(rng *rand.Rand) time.Duration
	// sys adapts the system (more workers, a shorter grace).
	sys func(sc *sysConfig)
	// before runs after the system started, before the wave (F9 waits
	// for the sale's start to come near).
	before func(r *run) error
	// ramp overrides the buyers' arrival spread (default arrival).
	ramp time.Duration
	// waveUsers, if set, bounds how many of the crowd's users buy in the
	// wave.
	waveUsers func(users int) int
	// tries overrides each wave buyer's tries (default waveTries).
	tries int
	// noSweep, if set, says why the sweep after the wave is left out.
	noSweep string
	// payments, if set, runs after the payments of every third buyer,
	// before the quiescence (payments_test.go).
	payments func(r *run, st crash.State)
	// check adds the scenario's own invariants on the quiescent state.
	check func(r *run, st crash.State)
}

// run is one scenario × seed.
type run struct {
	t      *testing.T
	ctx    context.Context
	name   string
	seed   uint64
	rng    *rand.Rand
	sys    *system
	crowds []*crash.Crowd // crowds[i] buys on apis[i]
	hc     *http.Client
	start  time.Time
	rec    *history.Recorder // every crowd buyer's and agentFor agent's answers

	mu       sync.Mutex
	timeline []event
	counts   map[string]int
	extra    map[string]int64  // accepted reservations outside the crowds (attackers) → user
	seen     map[string]string // reservation → a final /api/result status seen earlier
	viol     []string

	killed string // F12: the address of the killed master
	slot   int    // F12: the sale's hash slot
}

func (r *run) note(format string, a ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := event{at: time.Since(r.start).Round(10 * time.Millisecond), what: fmt.Sprintf(format, a...)}
	r.timeline = append(r.timeline, e)
	r.t.Logf("[%s +%v] %s", r.name, e.at, e.what)
}

func (r *run) count(k string, n int) {
	r.mu.Lock()
	r.counts[k] += n
	r.mu.Unlock()
}

// violation records a broken invariant (the test fails).
func (r *run) violation(format string, a ...any) {
	msg := fmt.Sprintf(format, a...)
	r.mu.Lock()
	r.viol = append(r.viol, msg)
	r.mu.Unlock()
	r.t.Errorf("%s: %s", r.name, msg)
}

// accepted returns every accepted reservation with its user.
func (r *run) accepted() map[string]int64 {
	out := map[string]int64{}
	for _, c := range r.crowds {
		for id, b := range c.Accepted() {
			out[id] = b.User
		}
	}
	r.mu.Lock()
	for id, u := range r.extra {
		out[id] = u
	}
	r.mu.Unlock()
	return out
}

func (r *run) acceptedIDs() []string {
	var ids []string
	for id := range r.accepted() {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// crowdUsers splits the crowd's users over the apis; every tenth user also
// buys on the next api at the same time (a double buy in parallel).
func (r *run) crowdUsers(users int) [][]int64 {
	n := len(r.crowds)
	out := make([][]int64, n)
	for u := 1; u <= users; u++ {
		i := (u - 1) % n
		out[i] = append(out[i], int64(u))
		if u%10 == 0 && n > 1 {
			out[(i+1)%n] = append(out[(i+1)%n], int64(u))
		}
	}
	return out
}

// wave runs every crowd at once; the fault strikes at the k-th buy request
// of all of them, is held for its window and healed, while the wave goes
// on. It returns when the wave and the fault ended.
func (r *run) wave(users int, k int64, f fault) {
	var buys atomic.Int64
	trig := make(chan struct{})
	for _, c := range r.crowds {
		c.SetPhase("wave")
		c.OnBuy = func(int64) {
			if buys.Add(1) == k {
				close(trig)
			}
		}
	}
	ramp, tries := arrival, waveTries
	if f.ramp > 0 {
		ramp = f.ramp
	}
	if f.tries > 0 {
		tries = f.tries
	}
	if r.start.IsZero() { // set already when the scenario's before hook noted something
		r.start = time.Now()
	}
	r.note("wave starts: %d users on %d apis arriving over %v, fault at buy request %d", users, len(r.crowds), ramp, k)
	var wg sync.WaitGroup
	stops := make([]map[string]int, len(r.crowds))
	for i, us := range r.crowdUsers(users) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stops[i] = r.crowds[i].Wave(r.ctx, us, crash.WaveOptions{Tries: tries, Ramp: ramp})
		}()
	}
	waveDone := make(chan struct{})
	go func() { wg.Wait(); close(waveDone) }()
	// The fault runs on the test's goroutine (restarts may fail the test),
	// while the buyers' goroutines go on.
	select {
	case <-trig:
	case <-waveDone:
		r.note("the fault's buy request %d was never reached: it strikes after the wave", k)
	}
	r.strikeAndHeal(f)
	<-waveDone
	all := map[string]int{}
	for _, m := range stops {
		for k, n := range m {
			all[k] += n
		}
	}
	r.note("wave ended after %d buy requests: buyers stopped: %s", buys.Load(), crash.FormatCounts(all))
	for _, c := range r.crowds {
		c.OnBuy = nil
	}
}

func (r *run) strikeAndHeal(f fault) {
	if f.strike == nil {
		return
	}
	if err := f.strike(r); err != nil {
		r.violation("strike: %v", err)
		return
	}
	if f.window != nil {
		d := f.window(r.rng)
		r.note("fault held for %v", d)
		t := time.NewTimer(d) // the fault's duration: a schedule, not a synchronisation
		select {
		case <-t.C:
		case <-r.ctx.Done():
			t.Stop()
		}
	}
	if f.heal != nil {
		if err := f.heal(r); err != nil {
			r.violation("heal: %v", err)
		}
	}
}

// progressNote notes how many orders the DB holds and how many buys the
// crowds were answered 202 so far (safe while the wave runs); it returns
// both.
func (r *run) progressNote(label string) (orders, accepted int) {
	for _, c := range r.crowds {
		accepted += int(c.AcceptedCount())
	}
	st, err := r.sys.store.Read(r.ctx)
	if err != nil {
		r.note("%s: read: %v", label, err)
		return -1, accepted
	}
	r.note("%s: %d orders in the DB, %d buys accepted so far", label, len(st.Orders), accepted)
	return len(st.Orders), accepted
}

// sweep is the sale going on after the fault: up to sweepMax buyers
// without a live order (seeded pick) buy again, split over the apis, while
// the unpaid orders of the first wave expire and their units come back.
func (r *run) sweep(st crash.State, users int) {
	live := map[string]bool{}
	for _, o := range st.Orders {
		if o.Status == order.OrderCreated || o.Status == order.OrderPaid {
			live[o.UserID] = true
		}
	}
	var pick []int64
	for _, u := range r.rng.Perm(users) {
		if !live[strconv.Itoa(u+1)] {
			pick = append(pick, int64(u+1))
		}
		if len(pick) == sweepMax {
			break
		}
	}
	var wg sync.WaitGroup
	stops := make([]map[string]int, len(r.crowds))
	for i, c := range r.crowds {
		var us []int64
		for j := i; j < len(pick); j += len(r.crowds) {
			us = append(us, pick[j])
		}
		c.SetPhase("sweep")
		wg.Add(1)
		go func() {
			defer wg.Done()
			stops[i] = c.Wave(r.ctx, us, crash.WaveOptions{Tries: 8, Ramp: arrival})
		}()
	}
	wg.Wait()
	all := map[string]int{}
	for _, m := range stops {
		for k, n := range m {
			all[k] += n
		}
	}
	r.note("sweep of %d buyers without a live order: stopped: %s", len(pick), crash.FormatCounts(all))
}

// settle waits until every accepted reservation has an order or a FAILED
// outcome, the outbox is drained and Redis holds nothing in flight.
func (r *run) settle(label string) crash.State {
	r.t.Helper()
	st, err := r.sys.store.WaitSettled(r.ctx, r.acceptedIDs(), settleBound)
	if err != nil {
		r.violation("%s: %v", label, err)
	}
	return st
}

// peekResults keeps every final /api/result answer: a later DB state must
// never contradict it.
func (r *run) peekResults() {
	for id, u := range r.accepted() {
		a := r.agentFor(u, 0).result(r.ctx, id)
		if a.Code == http.StatusOK && a.Status != "queued" && a.Status != "unknown" {
			r.seen[id] = a.Status
		}
	}
}

// agentFor returns a fresh agent of user on api i (mod the apis).
func (r *run) agentFor(user int64, i int) *agent {
	g := newAgent(r.hc, r.sys.apis[i%len(r.sys.apis)].URL, user)
	if r.rec != nil {
		g.hist = r.rec.NewClient(strconv.FormatInt(user, 10))
	}
	return g
}

// probeLockout: every buyer (at most probeMax) that spent its access token
// and holds nothing starts a new attempt the page's way; neither the
// token call nor the buy may refuse it as already_bought.
func (r *run) probeLockout(st crash.State) {
	if st.LiveUnits() >= st.Total {
		r.note("lock-out probe: sold out, nothing to probe (everyone is refused sold_out first)")
		return
	}
	spent, err := r.sys.store.SpentTokens(r.ctx)
	if err != nil {
		r.violation("spent tokens: %v", err)
		return
	}
	live := map[string]bool{}
	for _, o := range st.Orders {
		if o.Status == order.OrderCreated || o.Status == order.OrderPaid {
			live[o.UserID] = true
		}
	}
	var users []int64
	for u := range spent {
		if uid := strconv.FormatInt(u, 10); !live[uid] && st.Buyers[uid] == 0 {
			users = append(users, u)
		}
	}
	sort.Slice(users, func(i, j int) bool { return users[i] < users[j] })
	if len(users) > probeMax {
		users = users[:probeMax]
	}
	probed := map[string]int{}
	for i, u := range users {
		c := r.crowds[i%len(r.crowds)]
		b := c.Buyer(u)
		tok, buy := c.PageAttempt(r.ctx, b)
		probed["token "+tok.Status]++
		if tok.Code == http.StatusConflict && tok.Status == "already_bought" {
			r.violation("lock-out: user %d spent its token and holds nothing, /api/activity/token refused it already_bought", u)
		}
		if buy.Status == "already_bought" {
			r.violation("lock-out: user %d spent its token and holds nothing, the buy refused it already_bought", u)
		}
		if buy.Step != "" {
			probed["buy "+strconv.Itoa(buy.Code)+" "+buy.Status]++
		}
	}
	r.count("lockout probed", len(users))
	r.note("lock-out probe of %d buyers that spent their token and hold nothing: %s", len(users), crash.FormatCounts(probed))
}

// pay makes every third buyer with a CREATED order pay it; an answer paid
// must be PAID in the DB and an answer cancelled CANCELLED.
func (r *run) pay(st crash.State) {
	answers := map[string]string{}
	for _, o := range st.Orders {
		uid, err := strconv.ParseInt(o.UserID, 10, 64)
		if err != nil {
			r.violation("order %s has user %q, not a chaos buyer", o.OrderNo, o.UserID)
			continue
		}
		if o.Status != order.OrderCreated || uid%3 != 0 {
			continue
		}
		a := r.agentFor(uid, int(uid))
		p := a.pay(r.ctx, o.ReservationID, o.OrderNo)
		answers[o.ReservationID] = p.key()
		r.count("pay "+p.key(), 1)
	}
	after, err := r.sys.store.Read(r.ctx)
	if err != nil {
		r.violation("read after pay: %v", err)
		return
	}
	for id, k := range answers {
		o := after.Orders[id]
		switch {
		case k == "200 paid" && o.Status != order.OrderPaid:
			r.violation("pay of %s answered paid, the DB says %s", id, o.Status)
		case k == "409 cancelled" && o.Status != order.OrderCancelled:
			r.violation("pay of %s answered cancelled, the DB says %s", id, o.Status)
		}
	}
	r.note("payments: %d orders paid for: %v", len(answers), countValues(answers))
}

func countValues(m map[string]string) string {
	c := map[string]int{}
	for _, v := range m {
		c[v]++
	}
	return crash.FormatCounts(c)
}

// quiesce waits until no order is CREATED (paid, or cancelled by the
// canceller after -pay-timeout) and the stores are settled.
func (r *run) quiesce(payTimeout time.Duration) crash.State {
	deadline := time.Now().Add(payTimeout + settleBound)
	for {
		st := r.settle("quiesce")
		created := 0
		for _, o := range st.Orders {
			if o.Status == order.OrderCreated {
				created++
			}
		}
		if created == 0 {
			return st
		}
		if time.Now().After(deadline) || r.ctx.Err() != nil {
			r.violation("%d orders still CREATED after -pay-timeout %v + %v", created, payTimeout, settleBound)
			return st
		}
		t := time.NewTimer(250 * time.Millisecond) // poll interval
		select {
		case <-t.C:
		case <-r.ctx.Done():
			t.Stop()
		}
	}
}

// check counts every invariant on the settled, quiescent state st.
func (r *run) check(st crash.State) {
	for _, v := range st.Violations() {
		r.violation("%s", v)
	}
	// No duplicate order: straight from SQL (the State maps them by
	// reservation and would hide one).
	var dups []struct {
		ReservationID string
		N             int
	}
	if err := r.sys.store.DB.WithContext(r.ctx).Model(&order.Order{}).Select("reservation_id, COUNT(*) AS n").
		Where("activity_id = ?", "1").Group("reservation_id").Having("COUNT(*) > 1").Scan(&dups).Error; err != nil {
		r.violation("duplicate query: %v", err)
	}
	for _, d := range dups {
		r.violation("reservation %s has %d orders", d.ReservationID, d.N)
	}
	var outboxRows int64
	if err := r.sys.store.DB.WithContext(r.ctx).Table(outbox.Message{}.TableName()).Count(&outboxRows).Error; err != nil {
		r.violation("outbox count: %v", err)
	}
	r.count("outbox rows", int(outboxRows))
	if st.OutboxFailed > 0 {
		r.violation("outbox: %d rows spent their attempt budget (messages no consumer received)", st.OutboxFailed)
	}
	if st.OutboxPending > 0 {
		r.violation("outbox not drained: %d rows pending", st.OutboxPending)
	}
	// Every accepted reservation: exactly one order of its buyer or a
	// FAILED outcome, and /api/result says the same as the DB, now and in
	// every final answer seen before.
	orders, failed := 0, 0
	for id, u := range r.accepted() {
		o, hasOrder := st.Orders[id]
		_, isFailed := st.Failed(id)
		want := ""
		switch {
		case hasOrder && isFailed:
			r.violation("accepted %s has an order and a FAILED outcome", id)
			continue
		case hasOrder:
			orders++
			// A cancelled order reads as failed, reason cancelled
			// (status.Results).
			want = strings.ToLower(o.Status)
			if o.Status == order.OrderCancelled {
				want = "failed"
			}
			if o.UserID != strconv.FormatInt(u, 10) {
				r.violation("accepted %s of user %d is an order of user %s", id, u, o.UserID)
			}
		case isFailed:
			failed++
			want = "failed"
			r.count("failed: "+st.Dedup[id].Reason, 1)
		default:
			r.violation("accepted %s (user %d) has neither an order nor a FAILED outcome", id, u)
			continue
		}
		// /api/result spells a cancelled order two ways: "failed" with
		// reason "cancelled" (the result read from the DB, or the result
		// entry updated by the canceller) and "cancelled" (the result
		// entry in Redis still says success and the example's view reads
		// the order's status). Both state the same outcome: counted, not
		// a violation.
		spelledCancelled := func(s string) bool { return s == "cancelled" && hasOrder && o.Status == order.OrderCancelled }
		if a := r.agentFor(u, int(u)).result(r.ctx, id); a.Code != http.StatusOK || (a.Status != want && !spelledCancelled(a.Status)) {
			r.violation("/api/result/%s = %s, the DB says %q", id, a.key(), want)
		} else if a.Status != want {
			r.count("result spelled cancelled", 1)
		}
		if s, ok := r.seen[id]; ok && s != want && !(s == "created" && (want == "paid" || want == "refunded" || o.Status == order.OrderCancelled)) && !(s == "paid" && want == "refunded") {
			if spelledCancelled(s) {
				r.count("result spelled cancelled", 1)
			} else {
				r.violation("/api/result/%s answered %q earlier, the DB says %q", id, s, want)
			}
		}
	}
	sold := 0
	for _, o := range st.Orders {
		if o.Status == order.OrderPaid {
			sold++
		}
	}
	r.count("accepted", len(r.accepted()))
	r.count("orders", orders)
	r.count("failed", failed)
	r.count("paid", sold)
	r.count("cancelled", len(st.Orders)-sold)
	r.count("stock", int(st.Total))
	r.count("redis left", int(st.RedisRemaining()))
	r.count("db left", int(st.DBStock))
	r.checkHistories(st)
}

// checkHistories checks every recorded buyer's history (the crowds' buys
// and result reads, the agents' result reads and payments, this check's
// final reads included) against the model of a buy and the settled state
// st (package history).
func (r *run) checkHistories(st crash.State) {
	if r.rec == nil {
		return
	}
	v := history.Check(r.rec.Ops(), st.Truth())
	for _, x := range v.Violations {
		r.violation("history %s", x)
	}
	if v.Undecided > 0 {
		r.violation("history: %d reservation histories undecided (checker timeout)", v.Undecided)
	}
	r.count("histories checked", v.Reservations)
	r.count("history answers", v.Ops)
	r.note("buyer histories: %s", v)
}
