package checkout

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/seckillkit/seckill/internal/testenv"
	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/order/handoff"
	"github.com/seckillkit/seckill/stock"
)

// recStock is a real Deductor whose Stock calls are recorded as
// "<method> <activity> <reservation or user>" (Variants is the
// Deductor's own, so the unknown-variant rule asks the real list).
type recStock struct {
	*stock.Deductor
	mu    sync.Mutex
	calls []string
}

func (r *recStock) rec(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, fmt.Sprintf(format, args...))
}

func (r *recStock) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.calls
	r.calls = nil
	return c
}

func (r *recStock) Reserve(ctx context.Context, q stock.Request) (stock.Result, error) {
	r.rec("Reserve %s %s", q.Activity, q.ReservationID)
	return r.Deductor.Reserve(ctx, q)
}

func (r *recStock) Release(ctx context.Context, activity, id string) (stock.ReleaseResult, error) {
	r.rec("Release %s %s", activity, id)
	return r.Deductor.Release(ctx, activity, id)
}

func (r *recStock) Lookup(ctx context.Context, activity, id string) (stock.Reservation, bool, error) {
	r.rec("Lookup %s %s", activity, id)
	return r.Deductor.Lookup(ctx, activity, id)
}

func (r *recStock) Held(ctx context.Context, activity, user string) (int64, error) {
	r.rec("Held %s %s", activity, user)
	return r.Deductor.Held(ctx, activity, user)
}

func (r *recStock) SoldOut(activity string) bool {
	r.rec("SoldOut %s", activity)
	return r.Deductor.SoldOut(activity)
}

func (r *recStock) SoldOutFor(activity, id string) bool {
	r.rec("SoldOutFor %s %s", activity, id)
	return r.Deductor.SoldOutFor(activity, id)
}

// variantWorld is a sale "sale-1" with variants S (1 unit), M (2) and L
// (0), cap 2 over the sale, a plain sale "sale-2", over miniredis.
type variantWorld struct {
	rdb  redis.UniversalClient
	st   *recStock
	sub  *memSubmitter
	toks *memTokens
	co   *Checkout
}

func newVariantWorld(t *testing.T, limit int64, edit func(*Config)) *variantWorld {
	t.Helper()
	clk := testenv.NewEpochClock(0)
	rdb, mr := testenv.Miniredis(t)
	mr.SetTime(clk.Now())
	return newVariantWorldOn(t, rdb, clk, limit, edit)
}

// newVariantWorldOn is newVariantWorld on rdb (its keys under the test's
// prefix), clk the clock of a real server's tests.
func newVariantWorldOn(t *testing.T, rdb redis.UniversalClient, clk *testenv.Clock, limit int64, edit func(*Config)) *variantWorld {
	t.Helper()
	ctx := context.Background()
	d, err := stock.New(rdb, stock.WithClock(clk), stock.WithKeyPrefix(testenv.Prefix(t)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Load(ctx, stock.Activity{ID: "sale-1", PerUserLimit: limit,
		Variants: []stock.Variant{{ID: "S", Stock: 1}, {ID: "M", Stock: 2}, {ID: "L", Stock: 0}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Load(ctx, stock.Activity{ID: "sale-2", Stock: 2, PerUserLimit: 1}); err != nil {
		t.Fatal(err)
	}
	w := &variantWorld{rdb: rdb, st: &recStock{Deductor: d}, sub: &memSubmitter{}, toks: &memTokens{used: map[string]bool{}}}
	cfg := Config{Activity: "sale-1", Stock: w.st, Submitter: w.sub, Results: noResult, Node: "v1", Now: clk.Now, Tokens: w.toks, Price: 500}
	if edit != nil {
		edit(&cfg)
	}
	w.co, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func (w *variantWorld) buy(user, req, variant, tok string) Outcome {
	return w.co.Buy(context.Background(), &Attempt{User: user, RequestID: req, Variant: variant, Token: tok})
}

func wantCalls(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("%s: no call %q; calls: %q", what, w, got)
		}
	}
	for _, g := range got {
		if strings.HasPrefix(g, "Held sale-1 ") {
			continue // the spent-token rule asks what the buyer holds in the whole sale
		}
		if strings.Contains(g, " sale-1 ") || strings.HasSuffix(g, " sale-1") {
			t.Errorf("%s: call %q addresses the sale, not the variant", what, g)
		}
	}
}

// tok is the i-th distinct pool-shaped access token.
func tok(i int) string { return fmt.Sprintf("%s%02d%s", poolToken[:10], i, poolToken[12:]) }

// TestVariantStepsAddressVariant: every stock call of a variant attempt
// (the sold-out flag, the replay lookup, the spent-token rule's Held and
// Lookup, Reserve, the undo's Release, the resubmit) addresses
// "sale-1/<variant>" under the reservation's line entry "<id>#0", and the
// order message is an order with one line of the variant.
func TestVariantStepsAddressVariant(t *testing.T) {
	w := newVariantWorld(t, 2, nil)
	id := "u5.alice-r1/M"
	e := id + "#0"

	o := w.buy("alice", "r1", "M", tok(1))
	if o.Kind != Accepted || o.Reservation != id {
		t.Fatalf("first attempt: %+v, want accepted %q", o, id)
	}
	wantCalls(t, "accepted", w.st.take(), "SoldOut sale-1/M", "Lookup sale-1/M "+e, "Reserve sale-1/M "+e)
	m := w.sub.sent[len(w.sub.sent)-1]
	if m.ActivityID != "sale-1" || m.ReservationID != id || m.Qty != 0 || m.Price != 0 || len(m.Lines) != 1 ||
		m.Lines[0].ActivityID != "sale-1/M" || m.Lines[0].Qty != 1 || m.Lines[0].Price != 500 {
		t.Errorf("order message %+v, want one line of sale-1/M under sale-1", m)
	}
	if err := m.Validate(); err != nil {
		t.Errorf("order message: %v", err)
	}
	if _, err := m.Encode(); err != nil {
		t.Errorf("order message: %v", err)
	}

	// The retry: replayed, its message handed on again with the line.
	o = w.buy("alice", "r1", "M", tok(1))
	if o.Kind != Replayed || o.Reservation != id || o.Result.Status != order.StatusQueued || len(o.Result.Lines) != 1 ||
		o.Result.Lines[0].ActivityID != "sale-1/M" {
		t.Fatalf("retry: %+v", o)
	}
	wantCalls(t, "retry", w.st.take(), "Lookup sale-1/M "+e)
	if m := w.sub.sent[len(w.sub.sent)-1]; len(m.Lines) != 1 || m.Lines[0].ActivityID != "sale-1/M" || m.ReservationID != id {
		t.Errorf("resubmitted message %+v", m)
	}

	// The spent-token rule: the token is spent and alice holds M: a new
	// attempt with it is refused: what she holds is asked of the sale (one
	// Held, the sum over its sizes), the attempt's own entry of the variant.
	o = w.buy("alice", "r2", "M", tok(1))
	if o.Kind != Refused || o.Reason != AlreadyBought {
		t.Fatalf("spent token: %+v", o)
	}
	wantCalls(t, "spent token", w.st.take(), "Held sale-1 alice", "Lookup sale-1/M u5.alice-r2/M#0")
	// Nothing held in S, but the token is the sale's: alice holds M, so
	// the spent token is refused at S too (Held of the sale adds every
	// variant).
	o = w.buy("alice", "r3", "S", tok(1))
	if o.Kind != Refused || o.Reason != AlreadyBought {
		t.Fatalf("spent token, another variant: %+v", o)
	}
	calls := w.st.take()
	wantCalls(t, "spent token, S", calls, "Held sale-1 alice", "Lookup sale-1/S u5.alice-r3/S#0")
	for _, c := range calls {
		if strings.HasPrefix(c, "Held sale-1/") {
			t.Errorf("spent token, S: a Held of one size %q", c)
		}
	}
	// With a token of her own for the attempt, S sells within the sale's cap 2.
	if o = w.buy("alice", "r3", "S", tok(6)); o.Kind != Accepted {
		t.Fatalf("a fresh token at S: %+v", o)
	}
	wantCalls(t, "fresh token, S", w.st.take(), "SoldOut sale-1/S", "Lookup sale-1/S u5.alice-r3/S#0", "Reserve sale-1/S u5.alice-r3/S#0")

	// The undo: a hand-off refused before Kafka or the outbox saw it.
	w.sub.err = errors.New("encode failed")
	o = w.buy("bob", "r1", "M", tok(2))
	if o.Kind != Busy {
		t.Fatalf("failed hand-off: %+v", o)
	}
	wantCalls(t, "undo", w.st.take(), "Reserve sale-1/M u3.bob-r1/M#0", "Release sale-1/M u3.bob-r1/M#0")
	if r, ok, err := w.st.Deductor.Lookup(context.Background(), "sale-1/M", "u3.bob-r1/M#0"); err != nil || !ok || r.State == stock.Held {
		t.Errorf("the undone reservation: %+v %v %v", r, ok, err)
	}
	w.sub.err = nil

	// Sold out per variant: S is gone (alice holds its unit); bob is
	// refused S, M still sells; alice's retry of S gets her reservation.
	if o = w.buy("bob", "r2", "S", tok(3)); o.Kind != Refused || o.Reason != SoldOut || !o.Final {
		t.Fatalf("S sold out: %+v", o)
	}
	w.st.take()
	if o = w.buy("carol", "r1", "S", tok(4)); o.Kind != Refused || o.Reason != SoldOut {
		t.Fatalf("S sold out, again: %+v", o)
	}
	wantCalls(t, "sold out", w.st.take(), "SoldOut sale-1/S")
	if !w.st.Deductor.SoldOut("sale-1/S") || w.st.Deductor.SoldOut("sale-1/M") {
		t.Fatalf("the in-process flags: S %v, M %v; want S only", w.st.Deductor.SoldOut("sale-1/S"), w.st.Deductor.SoldOut("sale-1/M"))
	}
	if o = w.buy("alice", "r3", "S", tok(1)); o.Kind != Replayed || o.Reservation != "u5.alice-r3/S" {
		t.Fatalf("a winner's retry of a sold-out variant: %+v", o)
	}
	wantCalls(t, "a winner's retry, S sold out", w.st.take(), "SoldOut sale-1/S", "SoldOutFor sale-1/S u5.alice-r3/S#0")
	if o = w.buy("carol", "r2", "M", tok(4)); o.Kind != Accepted {
		t.Fatalf("M still sells: %+v", o)
	}
	if o = w.buy("dave", "r1", "L", tok(5)); o.Kind != Refused || o.Reason != SoldOut {
		t.Fatalf("L has no stock: %+v", o)
	}
}

// TestVariantShape: a malformed variant, a variant whose "<sale>/<variant>"
// is wider than the order's column, and a request ID that leaves no room
// for the variant and the line's "#0" are refused BadRequest (final)
// before any stock call.
func TestVariantShape(t *testing.T) {
	w := newVariantWorld(t, 2, nil)
	u64 := strings.Repeat("u", stock.MaxIDLen)
	for _, tc := range []struct{ user, req, variant string }{
		{"alice", "r1", "a b"},
		{"alice", "r1", "a/b"},
		{"alice", "r1", "M#0"},
		{"alice", "r1", strings.Repeat("v", stock.MaxIDLen-len("sale-1/")+1)},
		{"alice", "", strings.Repeat("v", stock.MaxIDLen+1)},
		{u64, strings.Repeat("r", MaxRequestIDLen), "M"},                     // 109 + "/M" + "#0" fits; this one does not:
		{u64, strings.Repeat("r", MaxRequestIDLen), strings.Repeat("v", 17)}, // 109 + 18 + 2 = 129
	} {
		o := w.buy(tc.user, tc.req, tc.variant, tok(1))
		fits := len(withVariant(reservationPrefix(tc.user)+tc.req, tc.variant))+len(lineEntry) <= maxEntryLen && tc.variant == "M"
		if fits {
			if o.Kind != Accepted {
				t.Errorf("%q/%q/%q: %+v, want accepted", tc.user, tc.req, tc.variant, o)
			}
			w.st.take()
			continue
		}
		if o.Kind != Refused || o.Reason != BadRequest || !o.Final || o.Reservation != "" {
			t.Errorf("%q/%q/%q: %+v, want refused bad_request (final)", tc.user, tc.req, tc.variant, o)
		}
		for _, c := range w.st.take() {
			if !strings.HasPrefix(c, "SoldOut") {
				t.Errorf("%q/%q/%q: a stock call %q", tc.user, tc.req, tc.variant, c)
			}
		}
	}
}

// TestVariantRetryOtherVariant: the same request ID naming another variant
// is another attempt: its own reservation ("…/S", not "…/M"), never the
// first one's, and a second unit only within the sale's cap over all
// variants (2 here, 1 in the second world).
func TestVariantRetryOtherVariant(t *testing.T) {
	ctx := context.Background()
	w := newVariantWorld(t, 2, nil)
	m := w.buy("alice", "r1", "M", tok(1))
	// The spent token is the sale's: refused at S while alice holds M.
	if s := w.buy("alice", "r1", "S", tok(1)); s.Kind != Refused || s.Reason != AlreadyBought {
		t.Fatalf("S with M's spent token: %+v", s)
	}
	s := w.buy("alice", "r1", "S", tok(3))
	if m.Kind != Accepted || s.Kind != Accepted || m.Reservation == s.Reservation || s.Reservation != "u5.alice-r1/S" {
		t.Fatalf("M %+v, S %+v", m, s)
	}
	if again := w.buy("alice", "r1", "M", tok(1)); again.Kind != Replayed || again.Reservation != m.Reservation {
		t.Fatalf("M again: %+v", again)
	}
	if n := w.sub.sent[1]; n.ReservationID != s.Reservation || n.Lines[0].ActivityID != "sale-1/S" {
		t.Errorf("S's order message %+v", n)
	}

	w = newVariantWorld(t, 1, nil)
	if m = w.buy("alice", "r1", "M", tok(1)); m.Kind != Accepted {
		t.Fatalf("M: %+v", m)
	}
	// A fresh token: the sale's cap, not the spent-token rule, refuses.
	if s = w.buy("alice", "r1", "S", tok(2)); s.Kind != Refused || s.Reason != AlreadyBought {
		t.Fatalf("S over the sale's cap 1: %+v", s)
	}
	var held int64
	for _, v := range []string{"S", "M", "L"} {
		h, err := w.st.Deductor.Held(ctx, "sale-1/"+v, "alice")
		if err != nil {
			t.Fatal(err)
		}
		held += h
	}
	if held != 1 {
		t.Errorf("alice holds %d units over the variants, want 1", held)
	}
}

// TestVariantUnknown: what stock answers "not loaded" for is told apart
// truthfully: a variant the sale does not have, and the sale itself bought
// without a variant, are refused final; a variant of a sale that has none
// too; a sale not loaded yet is retryable.
func TestVariantUnknown(t *testing.T) {
	w := newVariantWorld(t, 2, nil)
	for _, tc := range []struct {
		variant string
		reason  Reason
		final   bool
		msg     string
	}{
		{"XL", BadRequest, true, "unknown variant"},
		{"", BadRequest, true, "choose a variant"},
	} {
		o := w.buy("alice", "r-"+tc.variant, tc.variant, tok(1))
		if o.Kind != Refused || o.Reason != tc.reason || o.Final != tc.final || o.Message != tc.msg {
			t.Errorf("variant %q: %+v, want %s final=%v %q", tc.variant, o, tc.reason, tc.final, tc.msg)
		}
	}
	// Final: nothing given back; the spent token passes the next attempt
	// (a known variant), since the buyer holds nothing there.
	if w.toks.restored != 0 {
		t.Errorf("%d tokens given back after final refusals", w.toks.restored)
	}
	if o := w.buy("alice", "r-ok", "M", tok(1)); o.Kind != Accepted {
		t.Errorf("after an unknown variant, a known one: %+v", o)
	}

	plain := newVariantWorld(t, 2, func(c *Config) { c.Activity = "sale-2" })
	if o := plain.buy("alice", "r1", "M", tok(1)); o.Kind != Refused || o.Reason != BadRequest || !o.Final || o.Message != "this sale has no variants" {
		t.Errorf("a variant of a plain sale: %+v", o)
	}
	if o := plain.buy("alice", "r2", "", tok(2)); o.Kind != Accepted {
		t.Errorf("the plain sale: %+v", o)
	}

	absent := newVariantWorld(t, 2, func(c *Config) { c.Activity = "sale-3" })
	if o := absent.buy("alice", "r1", "M", tok(1)); o.Kind != Refused || o.Reason != NotStarted || o.Final {
		t.Errorf("a variant of a sale not loaded yet: %+v", o)
	}
	if o := absent.buy("alice", "r2", "", tok(2)); o.Kind != Refused || o.Reason != NotStarted || o.Final {
		t.Errorf("a sale not loaded yet: %+v", o)
	}

}

// TestVariantResult: Result reads a variant reservation from its line's
// ledger entry: queued with the line while held, FAILED released once
// released, nothing for another buyer or an ID no checkout makes.
func TestVariantResult(t *testing.T) {
	ctx := context.Background()
	w := newVariantWorld(t, 2, nil)
	o := w.buy("alice", "r1", "M", tok(1))
	if o.Kind != Accepted {
		t.Fatal(o)
	}
	res, err := w.co.Result(ctx, "alice", o.Reservation)
	if err != nil || res.Status != order.StatusQueued || len(res.Lines) != 1 || res.Lines[0].ActivityID != "sale-1/M" || res.Lines[0].Qty != 1 {
		t.Errorf("held: %+v %v", res, err)
	}
	for _, bad := range [][2]string{{"bob", o.Reservation}, {"alice", "u5.alice-r1/a+b"}, {"alice", "u5.alice-r1"}, {"alice", "u5.alice-r1/S"}} {
		if res, err := w.co.Result(ctx, bad[0], bad[1]); err != nil || res.Status != order.StatusNone {
			t.Errorf("Result(%s, %s) = %+v, %v; want nothing", bad[0], bad[1], res, err)
		}
	}
	if _, err := w.st.Deductor.Release(ctx, "sale-1/M", o.Reservation+"#0"); err != nil {
		t.Fatal(err)
	}
	if res, err := w.co.Result(ctx, "alice", o.Reservation); err != nil || res.Status != order.StatusFailed || res.Reason != handoff.ReasonReleased {
		t.Errorf("released: %+v %v", res, err)
	}
	if o := w.buy("alice", "r1", "M", tok(1)); o.Kind != Refused || o.Reason != Released {
		t.Errorf("retry of the released variant attempt: %+v", o)
	}
}

// TestVariantOnEveryRedis: the variant attempt's addressing, replay, the
// sale's cap over the variants, the unknown-variant rule and a variant
// sold out, on miniredis and on the real server and Cluster when
// SECKILL_REDIS_ADDR / SECKILL_REDIS_CLUSTER_ADDRS name them.
func TestVariantOnEveryRedis(t *testing.T) {
	for kind, rdb := range testenv.AllRedis(t) {
		t.Run(string(kind), func(t *testing.T) {
			clk := testenv.NewRealClock()
			w := newVariantWorldOn(t, rdb, clk, 1, nil)
			o := w.buy("alice", "r1", "M", tok(1))
			if o.Kind != Accepted || o.Reservation != "u5.alice-r1/M" {
				t.Fatalf("accepted: %+v", o)
			}
			wantCalls(t, "accepted", w.st.take(), "Reserve sale-1/M u5.alice-r1/M#0")
			if o = w.buy("alice", "r1", "M", tok(1)); o.Kind != Replayed || o.Reservation != "u5.alice-r1/M" {
				t.Fatalf("replay: %+v", o)
			}
			if o = w.buy("alice", "r1", "S", tok(2)); o.Kind != Refused || o.Reason != AlreadyBought {
				t.Fatalf("another variant over the sale's cap 1: %+v", o)
			}
			if o = w.buy("bob", "r1", "XL", tok(3)); o.Kind != Refused || o.Reason != BadRequest || !o.Final || o.Message != "unknown variant" {
				t.Fatalf("unknown variant: %+v", o)
			}
			if o = w.buy("bob", "r2", "S", tok(3)); o.Kind != Accepted {
				t.Fatalf("bob buys S: %+v", o)
			}
			if o = w.buy("carol", "r1", "S", tok(4)); o.Kind != Refused || o.Reason != SoldOut || !o.Final {
				t.Fatalf("S sold out: %+v", o)
			}
			if o = w.buy("carol", "r2", "M", tok(4)); o.Kind != Accepted {
				t.Fatalf("M still sells: %+v", o)
			}
			ctx := context.Background()
			for v, want := range map[string]int64{"S": 0, "M": 0, "L": 0} {
				st, err := w.st.Deductor.Stats(ctx, "sale-1/"+v)
				if err != nil || st.Remaining != want {
					t.Errorf("variant %s: %+v %v, want %d remaining", v, st, err, want)
				}
			}
		})
	}
}

// countingSubmitter takes every message (safe for concurrent use).
type countingSubmitter struct {
	mu   sync.Mutex
	msgs map[string]order.Message // by reservation ID
}

func (s *countingSubmitter) Submit(_ context.Context, m order.Message) (handoff.Route, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.msgs[m.ReservationID] = m
	return handoff.RouteNone + 1, nil
}

// TestVariantHammer: 300 buyers, 32 at a time, each choosing sizes of a
// 12-variant sale by a skewed distribution (the popular size sells out
// first) with three attempts each, some of them resends, on every Redis.
// Counted from Redis per variant: none oversold (remaining >= 0, remaining
// + held = initial), every buyer within each variant's cap (1) and the
// sale's (2), every Accepted reservation held in the variant its attempt
// named, and one order message per reservation, of that variant.
func TestVariantHammer(t *testing.T) {
	const (
		buyers   = 300
		parallel = 32
		variants = 12
	)
	for kind, rdb := range testenv.AllRedis(t) {
		t.Run(string(kind), func(t *testing.T) {
			ctx := context.Background()
			clk := testenv.NewRealClock()
			d, err := stock.New(rdb, stock.WithClock(clk), stock.WithKeyPrefix(testenv.Prefix(t)))
			if err != nil {
				t.Fatal(err)
			}
			vs := make([]stock.Variant, variants)
			var total int64
			for i := range vs {
				vs[i] = stock.Variant{ID: fmt.Sprintf("s%d", 36+i), Stock: int64(10 + 5*i), PerUserLimit: 1}
				total += vs[i].Stock
			}
			if _, err := d.Load(ctx, stock.Activity{ID: "hammer", PerUserLimit: 2, Variants: vs}); err != nil {
				t.Fatal(err)
			}
			sub := &countingSubmitter{msgs: map[string]order.Message{}}
			co, err := New(Config{Activity: "hammer", Stock: d, Submitter: sub, Results: noResult, Node: "h1", Now: clk.Now})
			if err != nil {
				t.Fatal(err)
			}
			// size i is chosen with weight 1/(i+1): s36 is wanted most
			pick := func(b, k int) string {
				x := (b*7919 + k*104729) % 1000
				var w [variants]int
				sum := 0
				for i := range w {
					w[i] = 1000 / (i + 1)
					sum += w[i]
				}
				x = x * sum / 1000
				for i := range w {
					if x < w[i] {
						return vs[i].ID
					}
					x -= w[i]
				}
				return vs[variants-1].ID
			}
			type answer struct {
				user, variant string
				o             Outcome
			}
			var mu sync.Mutex
			var answers []answer
			sem := make(chan struct{}, parallel)
			var wg sync.WaitGroup
			for b := range buyers {
				wg.Add(1)
				sem <- struct{}{}
				go func() {
					defer wg.Done()
					defer func() { <-sem }()
					user := fmt.Sprintf("b%d", b)
					for k := range 3 {
						v := pick(b, k)
						req := fmt.Sprintf("q%d", k)
						if k == 2 && b%3 == 0 { // a resend of the first attempt
							v, req = pick(b, 0), "q0"
						}
						o := co.Buy(ctx, &Attempt{User: user, RequestID: req, Variant: v})
						mu.Lock()
						answers = append(answers, answer{user, v, o})
						mu.Unlock()
					}
				}()
			}
			wg.Wait()

			held := map[string]stock.Reservation{} // "<variant> <entry>" → the entry
			perUser, perUserVariant := map[string]int64{}, map[string]int64{}
			var left int64
			for _, v := range vs {
				act := stock.VariantOf("hammer", v.ID)
				st, err := d.Stats(ctx, act)
				if err != nil {
					t.Fatal(err)
				}
				var h int64
				for cursor := uint64(0); ; {
					page, next, err := d.Reservations(ctx, act, cursor, 500)
					if err != nil {
						t.Fatal(err)
					}
					for _, r := range page {
						if r.State == stock.Held {
							if _, dup := held[v.ID+" "+r.ID]; !dup {
								held[v.ID+" "+r.ID] = r
								h += r.Qty
								perUser[r.User] += r.Qty
								perUserVariant[r.User+" "+v.ID] += r.Qty
							}
						}
					}
					if next == 0 {
						break
					}
					cursor = next
				}
				if st.Remaining < 0 || st.Remaining+h != v.Stock {
					t.Errorf("variant %s: remaining %d + held %d != initial %d", v.ID, st.Remaining, h, v.Stock)
				}
				left += st.Remaining
			}
			for u, q := range perUser {
				if q > 2 {
					t.Errorf("[cap] %s holds %d units of the sale, cap 2", u, q)
				}
			}
			for uv, q := range perUserVariant {
				if q > 1 {
					t.Errorf("[cap] %s: %d units, the variant's cap 1", uv, q)
				}
			}
			accepted := map[string]string{}
			kinds := map[string]int{}
			for _, a := range answers {
				kinds[a.o.Kind.String()+" "+string(a.o.Reason)]++
				switch a.o.Kind {
				case Accepted, Replayed:
					if v, ok := accepted[a.o.Reservation]; ok && v != a.variant {
						t.Errorf("reservation %q answered for %s and %s", a.o.Reservation, v, a.variant)
					}
					accepted[a.o.Reservation] = a.variant
					if _, ok := held[a.variant+" "+a.o.Reservation+"#0"]; !ok {
						t.Errorf("%s: %s %q not held in variant %s", a.user, a.o.Kind, a.o.Reservation, a.variant)
					}
				case Refused:
					if a.o.Reason != SoldOut && a.o.Reason != AlreadyBought {
						t.Errorf("%s at %s: %+v", a.user, a.variant, a.o)
					}
				default:
					t.Errorf("%s at %s: %+v", a.user, a.variant, a.o)
				}
			}
			if len(accepted) != len(held) {
				t.Errorf("%d reservations accepted, %d held", len(accepted), len(held))
			}
			for r, v := range accepted {
				m, ok := sub.msgs[r]
				if !ok || len(m.Lines) != 1 || m.Lines[0].ActivityID != stock.VariantOf("hammer", v) {
					t.Errorf("the order message of %q (variant %s): %+v", r, v, m)
				}
			}
			t.Logf("%d attempts: %v; %d units of %d sold, %d reservations", len(answers), kinds, total-left, total, len(held))
		})
	}
}

// TestSpentTokenRoundTrips: a new attempt with a spent access token by a
// buyer who holds a unit of the sale (a bot resending it on purpose)
// costs the same Redis round trips on a sale of 2 sizes and of 12: the
// spent-token rule asks Held of the sale once (the sum over its sizes),
// not one Held per size. Counted at the client, after a warm-up resend
// (scripts loaded, the size list learnt).
func TestSpentTokenRoundTrips(t *testing.T) {
	ctx := context.Background()
	trips := func(sizes int) int {
		clk := testenv.NewEpochClock(0)
		rdb, mr := testenv.Miniredis(t)
		mr.SetTime(clk.Now())
		n := &counter{}
		rdb.AddHook(n)
		d, err := stock.New(rdb, stock.WithClock(clk))
		if err != nil {
			t.Fatal(err)
		}
		vs := make([]stock.Variant, sizes)
		for i := range vs {
			vs[i] = stock.Variant{ID: fmt.Sprintf("s%d", i), Stock: 5}
		}
		if _, err := d.Load(ctx, stock.Activity{ID: "sale-1", PerUserLimit: 1, Variants: vs}); err != nil {
			t.Fatal(err)
		}
		co, err := New(Config{Activity: "sale-1", Stock: d, Submitter: &memSubmitter{}, Results: noResult, Node: "v1", Now: clk.Now,
			Tokens: &memTokens{used: map[string]bool{}}})
		if err != nil {
			t.Fatal(err)
		}
		buy := func(req, size string) Outcome {
			return co.Buy(ctx, &Attempt{User: "alice", RequestID: req, Variant: size, Token: tok(1)})
		}
		if o := buy("r1", "s0"); o.Kind != Accepted {
			t.Fatalf("%d sizes: the first buy: %+v", sizes, o)
		}
		if o := buy("r2", "s1"); o.Kind != Refused || o.Reason != AlreadyBought {
			t.Fatalf("%d sizes: warm-up resend: %+v", sizes, o)
		}
		*n = counter{}
		if o := buy("r3", fmt.Sprintf("s%d", sizes-1)); o.Kind != Refused || o.Reason != AlreadyBought || !o.Final {
			t.Fatalf("%d sizes: spent token: %+v", sizes, o)
		}
		return n.trips()
	}
	small, large := trips(2), trips(12)
	t.Logf("a spent-token attempt: %d round trips on 2 sizes, %d on 12", small, large)
	// The replay lookup, Held of the sale, the attempt's own lookup.
	if large != small || large > 3 {
		t.Errorf("a spent-token attempt costs %d round trips on 12 sizes, %d on 2; want the same, at most 3", large, small)
	}
}

// TestVariantSaleSoldOutFor: once every size of a sale in sizes is sold
// out, SoldOutFor refuses a buyer who won nothing (the early refusal a
// handler makes before reading the body) with no stock call that reaches
// Redis, and lets through a buyer who won a size, whose retry then gets
// its reservation back. Before, the sale's plain ID had no flag of its own
// and SoldOutFor never fired for a sale in sizes.
func TestVariantSaleSoldOutFor(t *testing.T) {
	w := newVariantWorld(t, 2, nil)
	n := &counter{}
	if o := w.buy("alice", "r1", "S", tok(1)); o.Kind != Accepted {
		t.Fatalf("alice buys S: %+v", o)
	}
	for i, u := range []string{"bob", "carol"} {
		if o := w.buy(u, "r1", "M", tok(2+i)); o.Kind != Accepted {
			t.Fatalf("%s buys M: %+v", u, o)
		}
	}
	if w.co.SoldOutFor("dave") {
		t.Fatal("refused before any size was seen sold out")
	}
	// Each size is refused once by Redis: its flag is set; the sale is
	// refused early once every size's is.
	for i, v := range []string{"S", "M", "L"} {
		if o := w.buy("dave", "r"+v, v, tok(5+i)); o.Kind != Refused || o.Reason != SoldOut {
			t.Fatalf("dave at %s: %+v", v, o)
		}
		if w.co.SoldOutFor("erin") != (v == "L") {
			t.Fatalf("after %s: SoldOutFor(erin) = %v", v, w.co.SoldOutFor("erin"))
		}
	}
	w.st.take()
	w.rdb.AddHook(n)
	for _, u := range []string{"dave", "erin"} {
		if !w.co.SoldOutFor(u) {
			t.Errorf("%s won nothing of a sale whose every size is sold out: not refused early", u)
		}
	}
	for _, u := range []string{"alice", "bob", "carol"} {
		if w.co.SoldOutFor(u) {
			t.Errorf("%s won a size: refused early", u)
		}
	}
	if n.trips() != 0 {
		t.Errorf("%d Redis round trips by SoldOutFor", n.trips())
	}
	for _, c := range w.st.take() {
		if !strings.HasPrefix(c, "SoldOut") {
			t.Errorf("SoldOutFor made the stock call %q", c)
		}
	}
	if o := w.buy("alice", "r1", "S", tok(1)); o.Kind != Replayed || o.Reservation != "u5.alice-r1/S" {
		t.Errorf("alice's retry: %+v", o)
	}
}
