// Package admintest holds Memory, an in-memory [admin.Backend] for the unit
// tests of the admin HTTP layer and of its CLI.
//
// Memory is a test double of the library (stock, order, outbox, risk): it
// keeps real state in maps and checks every argument the handler passes,
// but it proves nothing about Redis, the database or Kafka. It is
// acceptable only for testing the HTTP layer (routing, validation, auth,
// audit, idempotency, the CLI); the concrete Backend over the real packages
// is tested against the real stores.
package admintest

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/seckillkit/seckill/admin"
)

// Memory is an in-memory Backend. Its exported fields may be set before
// use; it is safe for concurrent use.
type Memory struct {
	mu         sync.Mutex
	activities map[string]*activity
	outbox     map[int64]string // id → PENDING, SENT, FAILED
	bans       map[string]admin.Ban
	calls      map[string]int
	bad        []string
	// Fail, when it has an entry for an operation ("pause", "topup", …),
	// makes that operation return the error without acting; an entry
	// "release:<reservation>" makes a reconcile apply fail that one
	// release (reported in Failed).
	Fail map[string]error
	// Clock stamps reservations and bans; nil is the system clock.
	Clock admin.Clock
	// Actions records admin.ActionOf of every activity mutation (pause,
	// resume, top-up, withdraw) that carried one.
	Actions []admin.Action
}

type activity struct {
	p            admin.LoadParams
	paused       bool
	remaining    int64
	total        int64
	reservations map[string]*admin.Reservation
	orders       map[string]admin.Order // by reservation ID
}

// NewMemory returns an empty Memory.
func NewMemory() *Memory {
	return &Memory{
		activities: map[string]*activity{},
		outbox:     map[int64]string{},
		bans:       map[string]admin.Ban{},
		calls:      map[string]int{},
		Fail:       map[string]error{},
	}
}

var _ admin.Backend = (*Memory)(nil)

// Calls returns how many times op reached the backend (including refused
// calls).
func (m *Memory) Calls(op string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls[op]
}

// BadCalls returns the argument violations seen: calls the handler should
// have refused before reaching the backend.
func (m *Memory) BadCalls() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.bad)
}

func (m *Memory) now() time.Time {
	if m.Clock != nil {
		return m.Clock.Now()
	}
	return time.Now()
}

// enter counts the call, checks ctx and the IDs, and returns the injected
// failure if any. Called with m.mu held.
func (m *Memory) enter(ctx context.Context, op string, ids ...string) error {
	m.calls[op]++
	if ctx == nil {
		m.bad = append(m.bad, op+": nil context")
	}
	for _, id := range ids {
		if a, v, ok := strings.Cut(id, "/"); ok && admin.ValidID(a) && admin.ValidID(v) {
			continue // a size of a sale in sizes (the variant routes)
		}
		if !admin.ValidID(id) {
			m.bad = append(m.bad, fmt.Sprintf("%s: invalid id %q", op, id))
			return fmt.Errorf("admintest: %s: id %q: %w", op, id, admin.ErrInvalidArgument)
		}
	}
	return m.Fail[op]
}

func (m *Memory) state(id string, a *activity) admin.ActivityState {
	if a == nil {
		return admin.ActivityState{Activity: id}
	}
	return admin.ActivityState{
		Activity: id, Loaded: true, Paused: a.paused, Remaining: a.remaining, Total: a.total,
		PerUserLimit: a.p.PerUserLimit, Start: a.p.Start, End: a.p.End,
	}
}

func (m *Memory) get(op, id string) (*activity, error) {
	a := m.activities[id]
	if a == nil {
		return nil, fmt.Errorf("admintest: %s %s: %w", op, id, admin.ErrNotFound)
	}
	return a, nil
}

// Load loads an activity, replacing any earlier state of it.
func (m *Memory) Load(ctx context.Context, p admin.LoadParams) (admin.Change, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.enter(ctx, "load", p.Activity); err != nil {
		return admin.Change{}, err
	}
	if p.Stock < 0 || p.PerUserLimit < 0 || !p.Start.IsZero() && !p.End.IsZero() && !p.End.After(p.Start) {
		m.bad = append(m.bad, fmt.Sprintf("load: bad params %+v", p))
		return admin.Change{}, admin.ErrInvalidArgument
	}
	before := m.state(p.Activity, m.activities[p.Activity])
	m.activities[p.Activity] = &activity{p: p, remaining: p.Stock, total: p.Stock,
		reservations: map[string]*admin.Reservation{}, orders: map[string]admin.Order{}}
	for _, v := range p.Variants { // each size its own activity "<activity>/<variant>"
		vp := admin.LoadParams{Activity: p.Activity + "/" + v.ID, Stock: v.Stock, PerUserLimit: v.PerUserLimit, Start: p.Start, End: p.End}
		m.activities[vp.Activity] = &activity{p: vp, remaining: v.Stock, total: v.Stock,
			reservations: map[string]*admin.Reservation{}, orders: map[string]admin.Order{}}
	}
	return admin.Change{Before: before, After: m.state(p.Activity, m.activities[p.Activity])}, nil
}

// Reserve adds a held reservation of activity (a buyer's reserve, for test
// setup): r's ID, User and Qty; its State and ReservedAt are Memory's.
func (m *Memory) Reserve(activity string, r admin.Reservation) error {
	id, user, qty := r.ID, r.User, r.Qty
	m.mu.Lock()
	defer m.mu.Unlock()
	a, err := m.get("reserve", activity)
	if err != nil {
		return err
	}
	if a.paused || a.remaining < qty {
		return fmt.Errorf("admintest: reserve: %w", admin.ErrConflict)
	}
	a.remaining -= qty
	a.reservations[id] = &admin.Reservation{ID: id, User: user, Qty: qty, State: "held", ReservedAt: m.now()}
	return nil
}

// Order records an order for a reservation (the consumer's job, for setup).
func (m *Memory) Order(activity, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	a, err := m.get("order", activity)
	if err != nil {
		return err
	}
	r := a.reservations[id]
	if r == nil {
		return admin.ErrNotFound
	}
	r.State = "consumed"
	a.orders[id] = admin.Order{OrderNo: "o-" + id, User: r.User, Qty: r.Qty, Status: "CREATED", CreatedAt: m.now()}
	return nil
}

// AddOutbox adds an outbox row with the given status (for setup).
func (m *Memory) AddOutbox(id int64, status string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.outbox[id] = status
}

// Stats implements admin.Backend.
func (m *Memory) Stats(ctx context.Context, id string) (admin.Stats, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.enter(ctx, "stats", id); err != nil {
		return admin.Stats{}, err
	}
	a, err := m.get("stats", id)
	if err != nil {
		return admin.Stats{}, err
	}
	s := admin.Stats{Activity: id, Redis: admin.RedisStats{Loaded: true, Paused: a.paused, Remaining: a.remaining,
		Total: a.total, PerUserLimit: a.p.PerUserLimit, Start: a.p.Start, End: a.p.End}}
	buyers := map[string]bool{}
	for _, r := range a.reservations {
		s.Redis.Reservations++
		if r.State != "released" {
			s.Redis.Held += r.Qty
			buyers[r.User] = true
		}
	}
	s.Redis.Buyers = int64(len(buyers))
	s.DB = admin.DBStats{Found: true, TotalStock: a.total}
	for _, o := range a.orders {
		s.DB.Orders++
		s.DB.SoldUnits += o.Qty
	}
	s.DB.Stock = a.total - s.DB.SoldUnits
	return s, nil
}

// Reservations implements admin.Backend.
func (m *Memory) Reservations(ctx context.Context, id, user string) ([]admin.Reservation, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.enter(ctx, "reservations", id, user); err != nil {
		return nil, err
	}
	a, err := m.get("reservations", id)
	if err != nil {
		return nil, err
	}
	var out []admin.Reservation
	for _, r := range a.reservations {
		if r.User == user {
			out = append(out, *r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// Story implements admin.Backend.
func (m *Memory) Story(ctx context.Context, id, resv string) (admin.Story, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.enter(ctx, "story", id, resv); err != nil {
		return admin.Story{}, err
	}
	a, err := m.get("story", id)
	if err != nil {
		return admin.Story{}, err
	}
	r := a.reservations[resv]
	if r == nil {
		return admin.Story{}, fmt.Errorf("admintest: story %s/%s: %w", id, resv, admin.ErrNotFound)
	}
	st := admin.Story{Activity: id, Reservation: resv}
	cp := *r
	st.Ledger = &cp
	if o, ok := a.orders[resv]; ok {
		st.Order = &o
		st.Result = &admin.Result{Status: "SUCCESS", OrderNo: o.OrderNo, At: o.CreatedAt}
		st.Dedup = &admin.Dedup{Key: resv, CreatedAt: o.CreatedAt}
	}
	return st, nil
}

func (m *Memory) control(ctx context.Context, op, id string, f func(a *activity) error) (admin.Change, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.enter(ctx, op, id); err != nil {
		return admin.Change{}, err
	}
	a, err := m.get(op, id)
	if err != nil {
		return admin.Change{}, err
	}
	if act, ok := admin.ActionOf(ctx); ok {
		m.Actions = append(m.Actions, act)
	}
	before := m.state(id, a)
	if err := f(a); err != nil {
		return admin.Change{}, err
	}
	return admin.Change{Before: before, After: m.state(id, a)}, nil
}

// Pause implements admin.Backend.
func (m *Memory) Pause(ctx context.Context, id string) (admin.Change, error) {
	return m.control(ctx, "pause", id, func(a *activity) error { a.paused = true; return nil })
}

// Resume implements admin.Backend.
func (m *Memory) Resume(ctx context.Context, id string) (admin.Change, error) {
	return m.control(ctx, "resume", id, func(a *activity) error { a.paused = false; return nil })
}

func (m *Memory) checkN(op string, n int64) error {
	if n <= 0 || n > admin.MaxQuantity {
		m.bad = append(m.bad, fmt.Sprintf("%s: n=%d", op, n))
		return fmt.Errorf("admintest: %s n=%d: %w", op, n, admin.ErrInvalidArgument)
	}
	return nil
}

// TopUp implements admin.Backend.
func (m *Memory) TopUp(ctx context.Context, id string, n int64) (admin.Change, error) {
	return m.control(ctx, "topup", id, func(a *activity) error {
		if err := m.checkN("topup", n); err != nil {
			return err
		}
		a.remaining += n
		a.total += n
		return nil
	})
}

// Withdraw implements admin.Backend.
func (m *Memory) Withdraw(ctx context.Context, id string, n int64) (admin.Change, error) {
	return m.control(ctx, "withdraw", id, func(a *activity) error {
		if err := m.checkN("withdraw", n); err != nil {
			return err
		}
		if n > a.remaining {
			return fmt.Errorf("admintest: withdraw %d of %d: %w", n, a.remaining, admin.ErrConflict)
		}
		a.remaining -= n
		a.total -= n
		return nil
	})
}

// Reconcile implements admin.Backend: held reservations without an order
// are the drift and are due at once (Memory has no grace period); an apply
// releases those of p.Plan that are still due, and no other.
func (m *Memory) Reconcile(ctx context.Context, p admin.ReconcileParams) (admin.ReconcileReport, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	op := "reconcile_apply"
	if p.DryRun {
		op = "reconcile_dry"
	}
	if err := m.enter(ctx, op, p.Activity); err != nil {
		return admin.ReconcileReport{}, err
	}
	if p.DryRun && p.Plan != nil {
		m.bad = append(m.bad, "reconcile_dry: a plan")
	}
	a, err := m.get(op, p.Activity)
	if err != nil {
		return admin.ReconcileReport{}, err
	}
	plan := map[string]bool{}
	for _, id := range p.Plan {
		plan[id] = true
	}
	rep := admin.ReconcileReport{Activity: p.Activity, DryRun: p.DryRun, TotalStock: a.total}
	ids := make([]string, 0, len(a.reservations))
	for rid := range a.reservations {
		ids = append(ids, rid)
	}
	sort.Strings(ids)
	due := map[string]bool{}
	for _, rid := range ids {
		r := a.reservations[rid]
		if r.State == "released" {
			continue
		}
		rep.Reservations++
		rep.ReservedUnits += r.Qty
		if o, ok := a.orders[rid]; ok {
			rep.LiveOrders++
			rep.SoldUnits += o.Qty
			continue
		}
		rep.Drift += r.Qty
		if p.DryRun {
			rep.Release = append(rep.Release, rid)
			continue
		}
		if !plan[rid] {
			continue // due since the dry run: the next one shows it
		}
		due[rid] = true
		if err := m.Fail["release:"+rid]; err != nil {
			rep.Failed = append(rep.Failed, rid)
			continue
		}
		rep.Release = append(rep.Release, rid)
		r.State = "released"
		r.ReleasedAt = m.now()
		a.remaining += r.Qty
		rep.Drift -= r.Qty
		rep.Reservations--
		rep.ReservedUnits -= r.Qty
	}
	for _, rid := range p.Plan {
		if !due[rid] {
			rep.Skipped = append(rep.Skipped, rid)
		}
	}
	sort.Strings(rep.Skipped)
	rep.ReleaseErrors = int64(len(rep.Failed))
	rep.DBStock = a.total - rep.SoldUnits
	rep.Conserved = rep.DBStock+rep.SoldUnits == rep.TotalStock
	return rep, nil
}

func (m *Memory) outboxStats() admin.OutboxStats {
	var s admin.OutboxStats
	for _, st := range m.outbox {
		switch st {
		case "PENDING":
			s.Pending++
		case "FAILED":
			s.Failed++
		}
	}
	return s
}

// OutboxStats implements admin.Backend.
func (m *Memory) OutboxStats(ctx context.Context) (admin.OutboxStats, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.enter(ctx, "outbox_stats"); err != nil {
		return admin.OutboxStats{}, err
	}
	return m.outboxStats(), nil
}

// OutboxRetry implements admin.Backend.
func (m *Memory) OutboxRetry(ctx context.Context, ids []int64) (admin.OutboxRetryResult, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.enter(ctx, "outbox_retry"); err != nil {
		return admin.OutboxRetryResult{}, err
	}
	if len(ids) == 0 || len(ids) > admin.MaxRetryIDs {
		m.bad = append(m.bad, fmt.Sprintf("outbox_retry: %d ids", len(ids)))
		return admin.OutboxRetryResult{}, admin.ErrInvalidArgument
	}
	res := admin.OutboxRetryResult{Before: m.outboxStats()}
	for _, id := range ids {
		if id <= 0 {
			m.bad = append(m.bad, fmt.Sprintf("outbox_retry: id %d", id))
			return admin.OutboxRetryResult{}, admin.ErrInvalidArgument
		}
		if m.outbox[id] == "FAILED" {
			m.outbox[id] = "PENDING"
			res.Requeued++
		}
	}
	res.After = m.outboxStats()
	return res, nil
}

func (m *Memory) checkSubject(op string, kind admin.BanKind, id string) error {
	if kind != admin.BanUser && kind != admin.BanIP && kind != admin.BanDevice || id == "" || len(id) > admin.MaxIDLen {
		m.bad = append(m.bad, fmt.Sprintf("%s: subject %q %q", op, kind, id))
		return admin.ErrInvalidArgument
	}
	return nil
}

// Ban implements admin.Backend.
func (m *Memory) Ban(ctx context.Context, p admin.BanParams) (admin.BanChange, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.enter(ctx, "ban", p.Reason); err != nil {
		return admin.BanChange{}, err
	}
	if err := m.checkSubject("ban", p.Kind, p.ID); err != nil {
		return admin.BanChange{}, err
	}
	if p.Duration < 0 {
		m.bad = append(m.bad, "ban: negative duration")
		return admin.BanChange{}, admin.ErrInvalidArgument
	}
	k := string(p.Kind) + ":" + p.ID
	var ch admin.BanChange
	if b, ok := m.bans[k]; ok {
		ch.Before = &b
	}
	d := p.Duration
	if d == 0 {
		d = time.Hour
	}
	b := admin.Ban{Kind: p.Kind, ID: p.ID, Reason: p.Reason, Until: m.now().Add(d).UTC()}
	if ch.Before != nil && (ch.Before.Permanent || ch.Before.Until.After(b.Until)) {
		b = *ch.Before // bans only grow
	}
	m.bans[k] = b
	ch.After = &b
	return ch, nil
}

// Unban implements admin.Backend.
func (m *Memory) Unban(ctx context.Context, kind admin.BanKind, id string) (admin.BanChange, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.enter(ctx, "unban"); err != nil {
		return admin.BanChange{}, err
	}
	if err := m.checkSubject("unban", kind, id); err != nil {
		return admin.BanChange{}, err
	}
	k := string(kind) + ":" + id
	var ch admin.BanChange
	if b, ok := m.bans[k]; ok {
		ch.Before = &b
		delete(m.bans, k)
	}
	return ch, nil
}

// Bans implements admin.Backend: the bans of kind by ID, the cursor the
// last ID of the page.
func (m *Memory) Bans(ctx context.Context, kind admin.BanKind, after string, limit int) ([]admin.Ban, string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.enter(ctx, "bans"); err != nil {
		return nil, "", err
	}
	if kind != admin.BanUser && kind != admin.BanIP && kind != admin.BanDevice || limit < 1 || limit > admin.MaxBansPage {
		m.bad = append(m.bad, fmt.Sprintf("bans: kind %q limit %d", kind, limit))
		return nil, "", admin.ErrInvalidArgument
	}
	var out []admin.Ban
	for _, b := range m.bans {
		if b.Kind == kind && b.ID > after {
			out = append(out, b)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	if len(out) <= limit {
		return out, "", nil
	}
	return out[:limit], out[limit-1].ID, nil
}

// Pay marks the order of a reservation paid (for setup).
func (m *Memory) Pay(activity, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	a, err := m.get("pay", activity)
	if err != nil {
		return err
	}
	o, ok := a.orders[id]
	if !ok {
		return admin.ErrNotFound
	}
	o.Status = "PAID"
	a.orders[id] = o
	return nil
}

// Refund refunds a PAID order: REFUNDED with its restock choice; with
// "sale" its units go back to the remaining stock.
func (m *Memory) Refund(ctx context.Context, p admin.RefundParams) (admin.OrderChange, error) {
	activity, orderNo, restock := p.Activity, p.OrderNo, p.Restock
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.enter(ctx, "refund", activity, orderNo); err != nil {
		return admin.OrderChange{}, err
	}
	if restock != "sale" && restock != "shop" && restock != "none" {
		m.bad = append(m.bad, fmt.Sprintf("refund: restock %q", restock))
		return admin.OrderChange{}, admin.ErrInvalidArgument
	}
	a, err := m.get("refund", activity)
	if err != nil {
		return admin.OrderChange{}, err
	}
	for id, o := range a.orders {
		if o.OrderNo != orderNo {
			continue
		}
		if o.Status != "PAID" {
			return admin.OrderChange{}, fmt.Errorf("admintest: refund %s: the order is %s: %w", orderNo, o.Status, admin.ErrConflict)
		}
		after := o
		after.Status, after.Restock = "REFUNDED", restock
		a.orders[id] = after
		if restock == "sale" {
			a.remaining += o.Qty
		}
		return admin.OrderChange{Before: o, After: after}, nil
	}
	return admin.OrderChange{}, fmt.Errorf("admintest: refund %s: %w", orderNo, admin.ErrNotFound)
}
