package checkout

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seckillkit/seckill/captcha"
	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/seckillkit/seckill/limiter"
	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/order/handoff"
	"github.com/seckillkit/seckill/order/status"
	"github.com/seckillkit/seckill/risk"
	"github.com/seckillkit/seckill/stock"
	"github.com/seckillkit/seckill/token"
)

// memStock is an in-memory Stock for the loop's unit tests (the
// conformance kit, checkouttest, runs the real one).
type memStock struct {
	mu        sync.Mutex
	remaining int64
	ledger    map[string]stock.Reservation
	released  []string
}

// Variants: the in-memory stock is a plain sale.
func (s *memStock) Variants(context.Context, string) ([]stock.Variant, error) {
	return nil, stock.ErrNotLoaded
}

func newMemStock(units int64) *memStock {
	return &memStock{remaining: units, ledger: map[string]stock.Reservation{}}
}

func (m *memStock) Reserve(_ context.Context, r stock.Request) (stock.Result, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.ledger[r.ReservationID]; ok {
		if e.State == stock.Held {
			return stock.Result{Status: stock.Reserved, Replayed: true, Remaining: m.remaining}, nil
		}
		return stock.Result{Status: stock.Released, Replayed: true, Remaining: m.remaining}, nil
	}
	if m.remaining < r.Qty {
		return stock.Result{Status: stock.SoldOut}, nil
	}
	m.remaining -= r.Qty
	m.ledger[r.ReservationID] = stock.Reservation{ID: r.ReservationID, User: r.User, Qty: r.Qty, State: stock.Held}
	return stock.Result{Status: stock.Reserved, Remaining: m.remaining}, nil
}

func (m *memStock) Release(_ context.Context, _, id string) (stock.ReleaseResult, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.released = append(m.released, id)
	e, ok := m.ledger[id]
	if !ok || e.State != stock.Held {
		return stock.ReleaseResult{}, nil
	}
	e.State = stock.Freed
	m.ledger[id] = e
	m.remaining += e.Qty
	return stock.ReleaseResult{Status: stock.ReleaseDone, Qty: e.Qty, User: e.User}, nil
}

func (m *memStock) Lookup(_ context.Context, _, id string) (stock.Reservation, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.ledger[id]
	return e, ok, nil
}

func (m *memStock) Held(_ context.Context, _, user string) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var q int64
	for _, e := range m.ledger {
		if e.User == user && e.State == stock.Held {
			q += e.Qty
		}
	}
	return q, nil
}

func (m *memStock) SoldOut(string) bool                  { return false }
func (m *memStock) SoldOutFor(string, string) bool       { return false }
func (m *memStock) SoldOutForPrefix(string, string) bool { return false }
func (m *memStock) held(id string) bool                  { e, ok := m.ledger[id]; return ok && e.State == stock.Held }
func (m *memStock) releases() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.released)
}
func (m *memStock) lookup(id string) (stock.Reservation, bool) { e, ok := m.ledger[id]; return e, ok }

// memTokens records what the token step does.
type memTokens struct {
	mu       sync.Mutex
	used     map[string]bool
	restored int
}

func (m *memTokens) Consume(_ context.Context, c token.ConsumeParams) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.used[c.Token] {
		return token.ErrUsed
	}
	m.used[c.Token] = true
	return nil
}

func (m *memTokens) Restore(_ context.Context, c token.ConsumeParams) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.used, c.Token)
	m.restored++
	return nil
}

// memSubmitter answers err, and releases like handoff.Submitter on ErrRetry.
type memSubmitter struct {
	err   error
	stock *memStock
	sent  []order.Message
}

func (s *memSubmitter) Submit(ctx context.Context, m order.Message) (handoff.Route, error) {
	if s.err != nil {
		if errors.Is(s.err, handoff.ErrRetry) { // the real one releases through the fence
			_, _ = s.stock.Release(ctx, m.ActivityID, m.ReservationID)
		}
		return handoff.RouteNone, s.err
	}
	s.sent = append(s.sent, m)
	return handoff.RouteNone + 1, nil
}

func noResult(context.Context, status.ResultQuery) (order.Result, error) { return order.Result{}, nil }

const poolToken = "AAAAAAAAAAAAAAAAAAAAAA" // 22 URL-safe characters

func baseConfig(st *memStock, sub *memSubmitter) Config {
	return Config{Activity: "sale-1", Stock: st, Submitter: sub, Results: noResult, Node: "t1",
		Now: testenv.NewEpochClock(0).Now}
}

func TestNewValidation(t *testing.T) {
	st := newMemStock(1)
	sub := &memSubmitter{stock: st}
	now := testenv.Epoch()
	keep := func(d []Step) []Step { return d }
	without := func(name string) func([]Step) []Step {
		return func(d []Step) []Step { return slices.DeleteFunc(d, func(s Step) bool { return s.Name == name }) }
	}
	for name, edit := range map[string]func(*Config){
		"no activity":       func(c *Config) { c.Activity = "" },
		"bad activity":      func(c *Config) { c.Activity = "a b" },
		"long activity":     func(c *Config) { c.Activity = strings.Repeat("a", stock.MaxIDLen+1) },
		"no stock":          func(c *Config) { c.Stock = nil },
		"no submitter":      func(c *Config) { c.Submitter = nil },
		"no results":        func(c *Config) { c.Results = nil },
		"negative price":    func(c *Config) { c.Price = -1 },
		"end before start":  func(c *Config) { c.Start, c.End = now, now.Add(-time.Second) },
		"end at start":      func(c *Config) { c.Start, c.End = now, now },
		"long node":         func(c *Config) { c.Node = "123456789" },
		"bad node":          func(c *Config) { c.Node = "a-b" },
		"no reserve":        func(c *Config) { c.Steps = without(StepReserve) },
		"no submit":         func(c *Config) { c.Steps = without(StepSubmit) },
		"duplicate":         func(c *Config) { c.Steps = func(d []Step) []Step { return append(d, d[0]) } },
		"unnamed step":      func(c *Config) { c.Steps = func(d []Step) []Step { return append(d, Step{Run: d[0].Run}) } },
		"step without run":  func(c *Config) { c.Steps = func(d []Step) []Step { return append(d, Step{Name: "x"}) } },
		"steps return none": func(c *Config) { c.Steps = func([]Step) []Step { return nil } },
	} {
		c := baseConfig(st, sub)
		edit(&c)
		if _, err := New(c); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: err %v, want ErrInvalidConfig", name, err)
		}
	}
	for name, edit := range map[string]func(*Config){
		"minimal":     func(*Config) {},
		"random node": func(c *Config) { c.Node = "" },
		"only start":  func(c *Config) { c.Start = now },
		"only end":    func(c *Config) { c.End = now },
		"window":      func(c *Config) { c.Start, c.End = now, now.Add(time.Hour) },
		"steps kept":  func(c *Config) { c.Steps = keep },
	} {
		c := baseConfig(st, sub)
		edit(&c)
		if _, err := New(c); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestReservationID: one to one over a generated table of users and
// request IDs made of the separator characters, prefix-free across users,
// never a server-made ID, and within every store's limits.
func TestReservationID(t *testing.T) {
	var users, reqs []string
	gen := func(alphabet string, n int) []string {
		out := []string{""}
		var all []string
		for range n {
			var next []string
			for _, p := range out {
				for _, c := range alphabet {
					next = append(next, p+string(c))
				}
			}
			all = append(all, next...)
			out = next
		}
		return all
	}
	users = gen("a-1.", 4) // 4+16+64+256 users, "-" and "." included
	reqs = gen("a-_", 3)
	seen := make(map[string][2]string, len(users)*len(reqs))
	for _, u := range users {
		prefix := reservationPrefix(u)
		for _, r := range reqs {
			id, err := ReservationID(u, r)
			if err != nil {
				t.Fatalf("ReservationID(%q, %q): %v", u, r, err)
			}
			if prev, dup := seen[id]; dup {
				t.Fatalf("ReservationID(%q, %q) = %q = ReservationID(%q, %q)", u, r, id, prev[0], prev[1])
			}
			seen[id] = [2]string{u, r}
			if !strings.HasPrefix(id, prefix) || strings.HasPrefix(id, "r") {
				t.Fatalf("ReservationID(%q, %q) = %q: prefix %q, or a server ID", u, r, id, prefix)
			}
		}
	}
	// Prefix-free: no user's prefix starts another user's IDs.
	for _, u := range users {
		pu := reservationPrefix(u)
		for _, v := range users {
			if u != v && strings.HasPrefix(reservationPrefix(v), pu) {
				t.Fatalf("the prefix of %q (%q) starts the IDs of %q (%q)", u, pu, v, reservationPrefix(v))
			}
		}
	}
	// The limits.
	u64, r40 := strings.Repeat("u", stock.MaxIDLen), strings.Repeat("r", MaxRequestIDLen)
	id, err := ReservationID(u64, r40)
	if err != nil || len(id) != longestReservationID || !stock.ValidReservationID(id) || !order.ValidReservationID(id) {
		t.Errorf("longest ID %q (%d bytes, want %d): %v", id, len(id), longestReservationID, err)
	}
	for _, bad := range [][2]string{
		{u64 + "u", "r"}, {"", "r"}, {"a b", "r"}, {"u", ""}, {"u", r40 + "r"}, {"u", "a.b"}, {"u", "a b"}, {"u", "a/b"},
	} {
		if id, err := ReservationID(bad[0], bad[1]); err == nil {
			t.Errorf("ReservationID(%q, %q) = %q, want an error", bad[0], bad[1], id)
		}
	}
	// Server-made IDs: distinct, valid, never a client attempt's.
	c, err := New(baseConfig(newMemStock(1), &memSubmitter{}))
	if err != nil {
		t.Fatal(err)
	}
	a, b := c.serverReservationID(), c.serverReservationID()
	if a == b || !strings.HasPrefix(a, "r") || !stock.ValidReservationID(a) || !order.ValidReservationID(a) {
		t.Errorf("server IDs %q, %q", a, b)
	}
}

func names(steps []Step) []string {
	out := make([]string, len(steps))
	for i, s := range steps {
		out[i] = s.Name
	}
	return out
}

// TestStepEdits: the default list follows the configured parts, and
// Config.Steps removes, replaces and inserts without touching the
// defaults it was handed.
func TestStepEdits(t *testing.T) {
	st := newMemStock(1)
	sub := &memSubmitter{stock: st}
	c, err := New(baseConfig(st, sub))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := names(c.Steps()), []string{StepShape, StepSoldOut, StepReplay, StepResubmit, StepReserve, StepSubmit}; !slices.Equal(got, want) {
		t.Errorf("minimal steps %v, want %v", got, want)
	}
	full := baseConfig(st, sub)
	full.Start = testenv.Epoch()
	full.Tokens = &memTokens{used: map[string]bool{}}
	full.Link = func(context.Context, token.VerifyParams) (token.Claims, error) { return token.Claims{}, nil }
	full.Captcha = func(context.Context, captcha.VerifyParams) error { return nil }
	full.Risk = func(context.Context, risk.Subject) (risk.Decision, error) { return risk.Decision{}, nil }
	full.PerUser = allowAll{}
	full.Global = func() bool { return true }
	var handed []string
	full.Steps = func(d []Step) []Step {
		handed = names(d)
		d = slices.DeleteFunc(d, func(s Step) bool { return s.Name == StepGlobal })  // remove
		i := slices.IndexFunc(d, func(s Step) bool { return s.Name == StepReserve }) // insert
		d = slices.Insert(d, i+1, Step{Name: "audit", Run: func(context.Context, *Attempt) Outcome { return Outcome{} }})
		j := slices.IndexFunc(d, func(s Step) bool { return s.Name == StepCaptcha }) // replace
		d[j] = Step{Name: StepCaptcha, Run: func(context.Context, *Attempt) Outcome { return Outcome{} }}
		return d
	}
	c, err = New(full)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{StepShape, StepWindow, StepSoldOut, StepGlobal, StepRisk, StepUserLimit, StepReplay, StepResubmit,
		StepLink, StepCaptcha, StepToken, StepReserve, StepSubmit}
	if got := handed; !slices.Equal(got, want) {
		t.Errorf("defaults handed to Steps %v, want %v", got, want)
	}
	want = []string{StepShape, StepWindow, StepSoldOut, StepRisk, StepUserLimit, StepReplay, StepResubmit,
		StepLink, StepCaptcha, StepToken, StepReserve, "audit", StepSubmit}
	if got := names(c.Steps()); !slices.Equal(got, want) {
		t.Errorf("edited steps %v, want %v", got, want)
	}
	for _, s := range c.Steps() {
		if guarded := s.Name == StepRisk || s.Name == StepReplay || s.Name == StepToken || s.Name == StepReserve; s.Guarded != guarded && s.Name != StepCaptcha {
			t.Errorf("step %s guarded %v", s.Name, s.Guarded)
		}
		if undo := s.Name == StepToken || s.Name == StepReserve; (s.Undo != nil) != undo {
			t.Errorf("step %s has undo %v", s.Name, s.Undo != nil)
		}
	}
	got := c.Steps()
	got[0].Name = "mutated"
	if c.Steps()[0].Name != StepShape {
		t.Errorf("Steps returned the checkout's own slice")
	}
}

// TestUndoRule: a Busy or retryable ending gives back, last first, what
// every earlier step took; a final one, or acceptance, gives back nothing;
// the step that ended is not undone; after handoff.ErrRetry the reservation,
// released by the submitter, is not released twice.
func TestUndoRule(t *testing.T) {
	ended := errors.New("ended")
	for _, tc := range []struct {
		name      string
		after     Outcome // what a step after reserve answers
		submitErr error
		kind      Kind
		reason    Reason
		undone    bool // token restored and reservation released
		releases  int  // Stock.Release calls
	}{
		{name: "accepted", kind: Accepted},
		{name: "busy", after: busy(ended), kind: Busy, reason: TryAgain, undone: true, releases: 1},
		{name: "retryable", after: refuse(Limited, false, "x"), kind: Refused, reason: Limited, undone: true, releases: 1},
		{name: "final", after: refuse(Denied, true, "x"), kind: Refused, reason: Denied},
		{name: "handoff_failed", submitErr: handoff.ErrRetry, kind: Refused, reason: HandoffFailed, undone: true, releases: 1},
		{name: "submit_error", submitErr: ended, kind: Busy, reason: TryAgain, undone: true, releases: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := newMemStock(3)
			sub := &memSubmitter{stock: st, err: tc.submitErr}
			tok := &memTokens{used: map[string]bool{}}
			var order []string
			cfg := baseConfig(st, sub)
			cfg.Tokens = tok
			cfg.Steps = func(d []Step) []Step {
				for i := range d {
					if u := d[i].Undo; u != nil {
						name := d[i].Name
						d[i].Undo = func(ctx context.Context, a *Attempt) { order = append(order, name); u(ctx, a) }
					}
				}
				i := slices.IndexFunc(d, func(s Step) bool { return s.Name == StepReserve })
				return slices.Insert(d, i+1, Step{Name: "after", Undo: func(context.Context, *Attempt) { order = append(order, "after") },
					Run: func(context.Context, *Attempt) Outcome { return tc.after }})
			}
			c, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			a := &Attempt{User: "u1", RequestID: "r1", Token: poolToken}
			o := c.Buy(context.Background(), a)
			if o.Kind != tc.kind || o.Reason != tc.reason {
				t.Fatalf("outcome %+v, want %s %s", o, tc.kind, tc.reason)
			}
			if o.Reservation != a.Reservation() || o.Reservation == "" {
				t.Errorf("outcome reservation %q, attempt %q", o.Reservation, a.Reservation())
			}
			if got := st.held(a.Reservation()); got == tc.undone {
				t.Errorf("reservation held %v after %s", got, tc.name)
			}
			if got := len(st.releases()); got != tc.releases {
				t.Errorf("%d releases, want %d", got, tc.releases)
			}
			if restored := tok.restored == 1; restored != tc.undone {
				t.Errorf("token restored %d times", tok.restored)
			}
			var want []string
			switch {
			case tc.undone && tc.after.Kind != 0: // the step after reserve ended it: reserve, then token
				want = []string{StepReserve, StepToken}
			case tc.undone: // submit ended it: "after" passed and is undone first
				want = []string{"after", StepReserve, StepToken}
			}
			if !slices.Equal(order, want) {
				t.Errorf("undo order %v, want %v", order, want)
			}
		})
	}
}

// TestStatusTable: every stock.Status becomes a truthful outcome, final
// or retryable; none is "unknown".
func TestStatusTable(t *testing.T) {
	want := map[stock.Status]struct {
		kind   Kind
		reason Reason
		final  bool
	}{
		stock.Reserved:     {0, "", false},
		stock.SoldOut:      {Refused, SoldOut, true},
		stock.LimitReached: {Refused, AlreadyBought, true},
		stock.NotStarted:   {Refused, NotStarted, false},
		stock.Ended:        {Refused, Ended, true},
		stock.NotLoaded:    {Refused, NotStarted, false},
		stock.Released:     {Refused, Released, true},
		stock.Frozen:       {Refused, TryAgain, false},
		stock.Paused:       {Refused, Paused, false},
	}
	n := 0
	for s := stock.Status(1); !strings.HasPrefix(s.String(), "Status("); s++ {
		n++
		w, ok := want[s]
		if !ok {
			t.Errorf("stock status %s (%d) is not in the table", s, s)
			continue
		}
		o := reserveOutcome(stock.Result{Status: s})
		if o.Kind != w.kind || o.Reason != w.reason || o.Final != w.final {
			t.Errorf("%s: %s %s final %v, want %s %s final %v", s, o.Kind, o.Reason, o.Final, w.kind, w.reason, w.final)
		}
		if o.Kind == Refused && (o.Message == "" || o.Err != nil) {
			t.Errorf("%s: message %q, err %v", s, o.Message, o.Err)
		}
	}
	if n != len(want) {
		t.Errorf("%d stock statuses, the table has %d", n, len(want))
	}
	if o := reserveOutcome(stock.Result{Status: stock.SoldOut, Fallback: true}); o.Kind != Refused || o.Reason != TryAgain || o.Final {
		t.Errorf("sold out from the DB pool: %+v, want a retryable busy", o)
	}
	if o := reserveOutcome(stock.Result{Status: 0}); o.Kind != Busy {
		t.Errorf("status 0: %+v, want busy", o)
	}
	if o := reserveOutcome(stock.Result{Status: stock.Paused}); o.RetryAfter <= 0 {
		t.Errorf("paused: no RetryAfter")
	}
}

// TestResultOwner: Result never answers another buyer's reservation, nor a
// malformed query.
func TestResultOwner(t *testing.T) {
	st := newMemStock(1)
	cfg := baseConfig(st, &memSubmitter{stock: st})
	cfg.Results = func(_ context.Context, q status.ResultQuery) (order.Result, error) {
		return order.Result{Activity: q.Activity, User: "owner", ReservationID: q.ReservationID, Status: order.StatusSuccess}, nil
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := ReservationID("owner", "r1")
	ctx := context.Background()
	if res, _ := c.Result(ctx, "owner", id); res.Status != order.StatusSuccess {
		t.Errorf("owner reads %q", res.Status)
	}
	for _, q := range [][2]string{{"other", id}, {"", id}, {"owner", ""}, {"a b", id}} {
		if res, _ := c.Result(ctx, q[0], q[1]); res.Status != order.StatusNone {
			t.Errorf("Result(%q, %q) = %q, want nothing", q[0], q[1], res.Status)
		}
	}
}

// TestConcurrentResend: a resend of the same attempt racing the first
// (the same request ID and token) gets the same reservation, never
// already_bought: the spent token passes when the buyer's holding is this
// attempt's own reservation.
func TestConcurrentResend(t *testing.T) {
	st := newMemStock(5)
	cfg := baseConfig(st, &memSubmitter{stock: st})
	cfg.Tokens = &memTokens{used: map[string]bool{}}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	first := c.Buy(ctx, &Attempt{User: "u1", RequestID: "r1", Token: poolToken})
	// The resend whose replay step ran before the first reserved: it
	// reaches the token step with the token spent and the unit held.
	resend := &Attempt{Activity: "sale-1", User: "u1", RequestID: "r1", Qty: 1, Token: poolToken}
	if o := c.stepShape(ctx, resend); o.Kind != 0 {
		t.Fatalf("shape: %+v", o)
	}
	if o := c.stepToken(ctx, resend); o.Kind != 0 {
		t.Fatalf("the racing resend at the token step: %+v", o)
	}
	if o := c.stepReserve(ctx, resend); o.Kind != 0 || resend.Reservation() != first.Reservation {
		t.Fatalf("the racing resend at reserve: %+v, reservation %q, want %q", o, resend.Reservation(), first.Reservation)
	}
	other := &Attempt{Activity: "sale-1", User: "u1", RequestID: "r2", Qty: 1, Token: poolToken}
	if o := c.stepShape(ctx, other); o.Kind != 0 {
		t.Fatalf("shape: %+v", o)
	}
	if o := c.stepToken(ctx, other); o.Reason != AlreadyBought {
		t.Errorf("another attempt with the spent token while holding: %+v, want already_bought", o)
	}
	if e, ok := st.lookup(first.Reservation); !ok || e.Qty != 1 {
		t.Errorf("ledger entry %+v", e)
	}
}

// allowAll is a limiter.Limiter that allows everything.
type allowAll struct{}

func (allowAll) AllowN(context.Context, string, int) (limiter.Result, error) {
	return limiter.Result{Allowed: true}, nil
}

// TestResultFromLedger: with no outcome recorded (a hand-off that wrote no
// QUEUED result), Result answers from the stock ledger: the buyer's held
// reservation is queued, a released one failed (released), another
// buyer's or an absent one unknown; an outcome Results knows wins.
func TestResultFromLedger(t *testing.T) {
	st := newMemStock(2)
	cfg := baseConfig(st, &memSubmitter{stock: st})
	known := map[string]order.Result{}
	cfg.Results = func(_ context.Context, q status.ResultQuery) (order.Result, error) {
		return known[q.ReservationID], nil
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	held, _ := ReservationID("owner", "r1")
	freed, _ := ReservationID("owner", "r2")
	for _, id := range []string{held, freed} {
		if _, err := st.Reserve(ctx, stock.Request{Activity: "sale-1", User: "owner", ReservationID: id, Qty: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.Release(ctx, "sale-1", freed); err != nil {
		t.Fatal(err)
	}
	absent, _ := ReservationID("owner", "r3")
	for _, tc := range []struct {
		user, id string
		want     order.Status
		reason   string
	}{
		{"owner", held, order.StatusQueued, ""},
		{"owner", freed, order.StatusFailed, handoff.ReasonReleased},
		{"owner", absent, order.StatusNone, ""},
		{"other", held, order.StatusNone, ""},
	} {
		res, err := c.Result(ctx, tc.user, tc.id)
		if err != nil || res.Status != tc.want || res.Reason != tc.reason {
			t.Errorf("Result(%s, %s) = %+v, %v; want %q %q", tc.user, tc.id, res, err, tc.want, tc.reason)
		}
		if tc.want != order.StatusNone && (res.User != tc.user || res.ReservationID != tc.id) {
			t.Errorf("Result(%s, %s) names %q / %q", tc.user, tc.id, res.User, res.ReservationID)
		}
	}
	known[held] = order.Result{Activity: "sale-1", User: "owner", ReservationID: held, Status: order.StatusSuccess, OrderNo: "o1"}
	if res, _ := c.Result(ctx, "owner", held); res.Status != order.StatusSuccess || res.OrderNo != "o1" {
		t.Errorf("a known outcome: %+v", res)
	}
}

// TestResultOrderWrittenBetweenReads: the order is written, then cancelled
// (its units released), between Result's read of the outcomes and its read
// of the ledger. The ledger then says released; the buyer had an order, and
// is told so (the chaos battery's FQ1 once saw "failed released" here, with
// SQL holding the cancelled order).
func TestResultOrderWrittenBetweenReads(t *testing.T) {
	st := newMemStock(2)
	cfg := baseConfig(st, &memSubmitter{stock: st})
	ctx := context.Background()
	id, _ := ReservationID("owner", "r1")
	if _, err := st.Reserve(ctx, stock.Request{Activity: "sale-1", User: "owner", ReservationID: id, Qty: 1}); err != nil {
		t.Fatal(err)
	}
	reads := 0
	cfg.Results = func(_ context.Context, q status.ResultQuery) (order.Result, error) {
		reads++
		if reads == 1 { // nothing yet; then the consumer writes the order and the canceller cancels it
			if _, err := st.Release(ctx, "sale-1", id); err != nil {
				t.Fatal(err)
			}
			return order.Result{}, nil
		}
		return order.Result{Activity: "sale-1", User: "owner", ReservationID: id, Status: order.StatusSuccess, OrderNo: "o1"}, nil
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Result(ctx, "owner", id)
	if err != nil || res.Status != order.StatusSuccess || res.OrderNo != "o1" {
		t.Fatalf("Result = %+v, %v; want the order o1 (not failed released)", res, err)
	}
}

// TestRetryOfCancelledOrderTellsCancelled: an attempt became an order and
// the order was cancelled at its pay timeout (its units released), then
// the buyer's retry of the same attempt arrives (its first answer lost
// when an api died: the battery's FQ1 found buyers told "released" whose
// orders exist, cancelled). The retry is answered with the order's
// outcome — FAILED cancelled, with its order number — not "released:
// start a new attempt", which tells a buyer who had an order that there
// was none. An attempt released with no order still answers Released.
func TestRetryOfCancelledOrderTellsCancelled(t *testing.T) {
	st := newMemStock(5)
	cfg := baseConfig(st, &memSubmitter{stock: st})
	ctx := context.Background()
	cancelled := map[string]bool{}
	cfg.Results = func(_ context.Context, q status.ResultQuery) (order.Result, error) {
		if cancelled[q.ReservationID] {
			return order.Result{Activity: q.Activity, User: q.User, ReservationID: q.ReservationID, Status: order.StatusFailed,
				Reason: status.ReasonCancelled, OrderNo: "o-" + q.ReservationID}, nil
		}
		return order.Result{}, nil
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	first := c.Buy(ctx, &Attempt{User: "u1", RequestID: "r1"})
	if first.Kind != Accepted {
		t.Fatalf("first buy: %+v", first)
	}
	// The order is written and cancelled at its pay timeout: the database
	// first, then the release.
	cancelled[first.Reservation] = true
	if _, err := st.Release(ctx, "sale-1", first.Reservation); err != nil {
		t.Fatal(err)
	}
	o := c.Buy(ctx, &Attempt{User: "u1", RequestID: "r1"})
	if o.Kind != Replayed || o.Result.Status != order.StatusFailed || o.Result.Reason != status.ReasonCancelled || o.Result.OrderNo == "" {
		t.Fatalf("retry of the cancelled order's attempt: %+v; want replayed FAILED cancelled with its order", o)
	}
	// Released with no order: Released, as before.
	second := c.Buy(ctx, &Attempt{User: "u2", RequestID: "r1"})
	if second.Kind != Accepted {
		t.Fatalf("second buy: %+v", second)
	}
	if _, err := st.Release(ctx, "sale-1", second.Reservation); err != nil {
		t.Fatal(err)
	}
	if o := c.Buy(ctx, &Attempt{User: "u2", RequestID: "r1"}); o.Kind != Refused || o.Reason != Released {
		t.Errorf("retry of an attempt released without an order: %+v; want refused released", o)
	}
}
