package checkouttest

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/seckillkit/seckill/checkout"
	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/stock"
)

// crashStep is the step the kit inserts before "reserve": it ends the
// attempts the crash scenario marks the way a crashed process would, with
// nothing undone.
const crashStep = "checkouttest.crash"

// crashed is the Reason of a simulated crash.
const crashed checkout.Reason = "checkouttest_crash"

// errUncertain is the error of a Reserve whose reply was lost.
var errUncertain = errors.New("checkouttest: reserve reply lost (the reservation was made)")

// errHeld is the error of the attempt the after-reserve step held.
var errHeld = errors.New("checkouttest: a step after reserve timed out")

// afterReserveStep is the step the kit inserts after "reserve": it holds
// the attempt the resend_during_undo scenarios mark until the scenario has
// resent it, then ends it Busy (a dependency of the caller's timing out),
// so the loop undoes the reservation the resend handed off.
const afterReserveStep = "checkouttest.after_reserve"

// stepFaults are the faults the kit injects through Config.Steps, each once
// for one request ID.
type stepFaults struct {
	mu        sync.Mutex
	uncertain map[string]bool // reserve succeeds, the caller sees an error
	crash     map[string]bool // the process dies between the token and reserve
	hold      map[string]held // stopped after reserve until released, then Busy
}

// held is one attempt the after-reserve step holds: reached is closed
// when it got there (its reservation made), the scenario closes proceed.
type held struct{ reached, proceed chan struct{} }

func (f *stepFaults) armHold(requestID string) held {
	f.mu.Lock()
	defer f.mu.Unlock()
	h := held{reached: make(chan struct{}), proceed: make(chan struct{})}
	f.hold[requestID] = h
	return h
}

func (f *stepFaults) takeHold(requestID string) (held, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	h, ok := f.hold[requestID]
	delete(f.hold, requestID)
	return h, ok
}

func (f *stepFaults) arm(m map[string]bool, requestID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m[requestID] = true
}

func (f *stepFaults) take(m map[string]bool, requestID string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !m[requestID] {
		return false
	}
	delete(m, requestID)
	return true
}

// edit is Config.Steps: reserve wrapped, the crash step inserted before it.
func (f *stepFaults) edit(steps []checkout.Step) []checkout.Step {
	out := make([]checkout.Step, 0, len(steps)+1)
	for _, s := range steps {
		if s.Name != checkout.StepReserve {
			out = append(out, s)
			continue
		}
		out = append(out, checkout.Step{Name: crashStep, Run: func(_ context.Context, a *checkout.Attempt) checkout.Outcome {
			if f.take(f.crash, a.RequestID) { // Final: the loop undoes nothing, as after a crash
				return checkout.Outcome{Kind: checkout.Refused, Reason: crashed, Final: true, Message: "simulated crash"}
			}
			return checkout.Outcome{}
		}})
		run := s.Run
		s.Run = func(ctx context.Context, a *checkout.Attempt) checkout.Outcome {
			o := run(ctx, a)
			if o.Kind == 0 && f.take(f.uncertain, a.RequestID) {
				return checkout.Outcome{Kind: checkout.Busy, Reason: checkout.TryAgain, Message: "busy, retry shortly", Err: errUncertain}
			}
			return o
		}
		out = append(out, s, checkout.Step{Name: afterReserveStep, Run: func(ctx context.Context, a *checkout.Attempt) checkout.Outcome {
			h, ok := f.takeHold(a.RequestID)
			if !ok {
				return checkout.Outcome{}
			}
			close(h.reached)
			select {
			case <-h.proceed:
			case <-ctx.Done():
			}
			return checkout.Outcome{Kind: checkout.Busy, Reason: checkout.TryAgain, Message: "busy, retry shortly", Err: errHeld}
		}})
	}
	return out
}

// kit is one scenario's run.
type kit struct {
	t      testing.TB
	ctx    context.Context
	sale   *Sale
	cfg    Config
	faults *stepFaults

	mu      sync.Mutex
	owner   map[string]string // every Accepted or Replayed reservation → its buyer
	variant map[string]string // … → the variant its attempt named
}

func runScenario(t testing.TB, sc scenario, newSale NewSale) {
	t.Helper()
	f := &stepFaults{uncertain: map[string]bool{}, crash: map[string]bool{}, hold: map[string]held{}}
	c := sc.cfg
	c.Steps = f.edit
	if len(c.Variants) > 0 {
		c.Variants = append([]stock.Variant(nil), c.Variants...)
		c.Stock = 0
		for _, v := range c.Variants {
			c.Stock += v.Stock
		}
	}
	sale := newSale(t, c)
	switch {
	case sale == nil || sale.Checkout == nil || sale.Attempt == nil || sale.Drain == nil || sale.Counts == nil:
		t.Fatalf("checkouttest: the constructor must return a Sale with Checkout, Attempt, Drain and Counts")
	case !hasStep(sale.Checkout, crashStep):
		t.Fatalf("checkouttest: the constructor must apply Config.Steps last (checkout.Config{Steps: c.Steps})")
	}
	if sc.needs != nil {
		if reason := sc.needs(sale); reason != "" {
			t.Skipf("checkouttest: %s: skipped: %s", sc.name, reason)
		}
	}
	k := &kit{t: t, ctx: context.Background(), sale: sale, cfg: c, faults: f, owner: map[string]string{}, variant: map[string]string{}}
	sc.run(k)
}

func hasStep(c *checkout.Checkout, name string) bool {
	for _, s := range c.Steps() {
		if s.Name == name {
			return true
		}
	}
	return false
}

// attempt is a fresh attempt of user with requestID.
func (k *kit) attempt(user, requestID string) checkout.Attempt {
	k.t.Helper()
	return k.attemptAt(user, requestID, "")
}

// attemptAt is a fresh attempt of user with requestID at variant.
func (k *kit) attemptAt(user, requestID, variant string) checkout.Attempt {
	k.t.Helper()
	a, err := k.sale.Attempt(k.ctx, user)
	if err != nil {
		k.t.Fatalf("checkouttest: Sale.Attempt(%q): %v", user, err)
	}
	a.RequestID, a.Variant = requestID, variant
	return a
}

// buyAt sends one fresh attempt of user with requestID at variant, alone,
// and checks that the answer tells the truth.
func (k *kit) buyAt(user, requestID, variant string) checkout.Outcome {
	k.t.Helper()
	return k.send(k.attemptAt(user, requestID, variant), false)
}

func (k *kit) counts() Counts {
	k.t.Helper()
	n, err := k.sale.Counts(k.ctx)
	if err != nil {
		k.t.Fatalf("checkouttest: Sale.Counts: %v", err)
	}
	return n
}

func (k *kit) record(a *checkout.Attempt, o checkout.Outcome) {
	if (o.Kind == checkout.Accepted || o.Kind == checkout.Replayed) && o.Reservation != "" {
		k.mu.Lock()
		defer k.mu.Unlock()
		k.owner[o.Reservation] = a.User
		if v, ok := k.variant[o.Reservation]; ok && v != a.Variant {
			k.t.Errorf("[variant] %s/%s: reservation %q answered %s for variant %q, and for variant %q before", a.User, a.RequestID,
				o.Reservation, o.Kind, a.Variant, v)
		}
		k.variant[o.Reservation] = a.Variant
	}
}

// buy sends one fresh attempt of user with requestID, alone, and checks
// that the answer tells the truth.
func (k *kit) buy(user, requestID string) checkout.Outcome {
	k.t.Helper()
	return k.send(k.attempt(user, requestID), false)
}

// send runs a alone and checks its answer against the counts before and
// after it. injected: the kit made the answer (a lost reply, a crash), so
// only what the server kept is recorded.
func (k *kit) send(a checkout.Attempt, injected bool) checkout.Outcome {
	k.t.Helper()
	before := k.counts()
	o := k.sale.Checkout.Buy(k.ctx, &a)
	after := k.counts()
	k.record(&a, o)
	if injected {
		if u, ok := after.Held[o.Reservation]; ok && u.User == a.User {
			k.mu.Lock()
			k.owner[o.Reservation] = a.User // the server kept it: it must end as an order or FAILED
			k.mu.Unlock()
		}
		return o
	}
	r := o.Reservation
	_, heldBefore := before.Held[r]
	u, heldAfter := after.Held[r]
	switch {
	case o.Kind == checkout.Accepted:
		if r == "" || !heldAfter || u.User != a.User {
			k.t.Errorf("[truth] %s/%s: Accepted %q but the buyer holds no such reservation", a.User, a.RequestID, r)
		}
	case o.Kind == checkout.Replayed:
		switch o.Result.Status {
		case order.StatusQueued, order.StatusSuccess:
			if !heldAfter || u.User != a.User {
				k.t.Errorf("[truth] %s/%s: Replayed %q %s but the reservation is not held", a.User, a.RequestID, r, o.Result.Status)
			}
		case order.StatusFailed:
		default:
			k.t.Errorf("[truth] %s/%s: Replayed %q with result %q", a.User, a.RequestID, r, o.Result.Status)
		}
	case o.Kind == checkout.Busy || o.Kind == checkout.Refused && !o.Final:
		if r != "" && !heldBefore && heldAfter {
			k.t.Errorf("[truth] %s/%s: a retryable %s (%s at %q) left reservation %q held", a.User, a.RequestID, o.Kind, o.Reason, o.Step, r)
		}
		if before.TokensUsed >= 0 && after.TokensUsed > before.TokensUsed {
			k.t.Errorf("[truth] %s/%s: a retryable %s (%s at %q) kept the access token (used %d → %d)", a.User, a.RequestID, o.Kind, o.Reason, o.Step,
				before.TokensUsed, after.TokensUsed)
		}
	case o.Kind == checkout.Refused:
		if r != "" && !heldBefore && heldAfter {
			k.t.Errorf("[truth] %s/%s: refused %s (final) but reservation %q is held", a.User, a.RequestID, o.Reason, r)
		}
		if left := after.RedisRemaining; o.Reason == checkout.SoldOut && after.VariantRemaining != nil {
			if left = after.VariantRemaining[a.Variant]; left > 0 {
				k.t.Errorf("[truth] %s/%s: refused sold_out for variant %q while %d of its units remain", a.User, a.RequestID, a.Variant, left)
			}
		} else if o.Reason == checkout.SoldOut && left > 0 {
			k.t.Errorf("[truth] %s/%s: refused sold_out while %d units remain", a.User, a.RequestID, left)
		}
	default:
		k.t.Errorf("[truth] %s/%s: outcome of kind %s", a.User, a.RequestID, o.Kind)
	}
	return o
}

// concurrently sends as at once and returns their answers in order.
func (k *kit) concurrently(as []checkout.Attempt) []checkout.Outcome {
	outs := make([]checkout.Outcome, len(as))
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range as {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			outs[i] = k.sale.Checkout.Buy(k.ctx, &as[i])
		}()
	}
	close(start)
	wg.Wait()
	for i := range outs {
		k.record(&as[i], outs[i])
	}
	return outs
}

// settle drains the pipeline and checks every invariant; it returns the
// counts after the drain.
func (k *kit) settle() Counts {
	k.t.Helper()
	if err := k.sale.Drain(k.ctx); err != nil {
		k.t.Fatalf("checkouttest: Sale.Drain: %v", err)
	}
	n := k.counts()
	t := k.t
	var held, live, inFlight int64
	heldBy, liveBy := map[string]int64{}, map[string]int64{}
	for id, u := range n.Held {
		held += u.Qty
		heldBy[u.User] += u.Qty
		if _, ok := n.Live[id]; !ok {
			inFlight += u.Qty
		}
	}
	for id, u := range n.Live {
		live += u.Qty
		liveBy[u.User] += u.Qty
		if h, ok := n.Held[id]; !ok || h.Qty != u.Qty || h.User != u.User {
			t.Errorf("[conserved] live order of reservation %q (%s ×%d) has no matching held reservation in Redis (%+v)", id, u.User, u.Qty, h)
		}
	}
	// no oversell
	if live > n.Initial || n.RedisRemaining < 0 || n.DBRemaining < 0 {
		t.Errorf("[oversell] %d units in live orders of %d; Redis remaining %d, DB remaining %d", live, n.Initial, n.RedisRemaining, n.DBRemaining)
	}
	// the per-user cap, in Redis and in the DB
	limit := max(k.cfg.PerUserLimit, 1)
	for u, q := range heldBy {
		if q > limit {
			t.Errorf("[cap] %s holds %d units in Redis, cap %d", u, q, limit)
		}
	}
	for u, q := range liveBy {
		if q > limit {
			t.Errorf("[cap] %s has %d units in live orders, cap %d", u, q, limit)
		}
	}
	// no duplicate order per reservation
	for id, c := range n.Rows {
		if c > 1 {
			t.Errorf("[dup] reservation %q has %d orders", id, c)
		}
	}
	// stock conserved
	if inFlight != 0 {
		t.Errorf("[conserved] %d units held in flight (no order) after Drain", inFlight)
	}
	if n.RedisRemaining+inFlight+live != n.Initial {
		t.Errorf("[conserved] Redis remaining %d + held in flight %d + live orders %d != initial %d", n.RedisRemaining, inFlight, live, n.Initial)
	}
	if n.RedisRemaining+held != n.Initial {
		t.Errorf("[conserved] Redis remaining %d + held %d != initial %d", n.RedisRemaining, held, n.Initial)
	}
	if n.DBRemaining+live != n.Initial {
		t.Errorf("[conserved] DB stock %d + live orders %d != initial %d", n.DBRemaining, live, n.Initial)
	}
	k.settleVariants(n)
	// nothing accepted lost, and the buyer told the truth: settled, readable by its owner
	k.mu.Lock()
	owners := make(map[string]string, len(k.owner))
	for r, u := range k.owner {
		owners[r] = u
	}
	k.mu.Unlock()
	for r, u := range owners {
		res, err := k.sale.Checkout.Result(k.ctx, u, r)
		if err != nil {
			t.Errorf("[lost] Result(%s, %q): %v", u, r, err)
			continue
		}
		lu, isLive := n.Live[r]
		switch res.Status {
		case order.StatusSuccess:
			if !isLive || lu.User != u || n.Rows[r] != 1 {
				t.Errorf("[lost] reservation %q of %s reads SUCCESS but has %d order rows (live %v, buyer %q)", r, u, n.Rows[r], isLive, lu.User)
			}
		case order.StatusFailed:
			if isLive {
				t.Errorf("[lost] reservation %q of %s reads FAILED but has a live order", r, u)
			}
		default:
			t.Errorf("[lost] accepted reservation %q of %s reads %q after Drain: neither an order nor FAILED", r, u, res.Status)
		}
	}
	return n
}

// settleVariants checks the invariants per variant of a sale with
// variants: no oversell, conservation in Redis and in SQL, the variant's
// cap, and every order for the variant its attempt named.
func (k *kit) settleVariants(n Counts) {
	t := k.t
	if len(k.cfg.Variants) == 0 {
		return
	}
	if n.VariantRemaining == nil || n.VariantDBRemaining == nil {
		t.Errorf("[conserved] a sale with variants counted without them (Counts.VariantRemaining, VariantDBRemaining)")
		return
	}
	for _, v := range k.cfg.Variants {
		var held, live int64
		heldBy, liveBy := map[string]int64{}, map[string]int64{}
		for _, u := range n.Held {
			if u.Variant == v.ID {
				held += u.Qty
				heldBy[u.User] += u.Qty
			}
		}
		for _, u := range n.Live {
			if u.Variant == v.ID {
				live += u.Qty
				liveBy[u.User] += u.Qty
			}
		}
		rr, dr := n.VariantRemaining[v.ID], n.VariantDBRemaining[v.ID]
		if live > v.Stock || rr < 0 || dr < 0 {
			t.Errorf("[oversell] variant %s: %d units in live orders of %d; Redis remaining %d, DB remaining %d", v.ID, live, v.Stock, rr, dr)
		}
		if rr+held != v.Stock {
			t.Errorf("[conserved] variant %s: Redis remaining %d + held %d != initial %d", v.ID, rr, held, v.Stock)
		}
		if dr+live != v.Stock {
			t.Errorf("[conserved] variant %s: DB stock %d + live orders %d != initial %d", v.ID, dr, live, v.Stock)
		}
		limit := v.PerUserLimit
		if limit == 0 {
			limit = max(k.cfg.PerUserLimit, 1)
		}
		for u, q := range heldBy {
			if q > limit {
				t.Errorf("[cap] %s holds %d units of variant %s in Redis, cap %d", u, q, v.ID, limit)
			}
		}
		for u, q := range liveBy {
			if q > limit {
				t.Errorf("[cap] %s has %d units of variant %s in live orders, cap %d", u, q, v.ID, limit)
			}
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for r, v := range k.variant {
		if u, ok := n.Live[r]; ok && u.Variant != v {
			t.Errorf("[variant] reservation %q of %s: its attempt named variant %q, its order is for %q", r, u.User, v, u.Variant)
		}
		if u, ok := n.Held[r]; ok && u.Variant != v {
			t.Errorf("[variant] reservation %q of %s: its attempt named variant %q, Redis holds it in %q", r, u.User, v, u.Variant)
		}
	}
}

// variantUnits sums the quantities of user's units of variant in m.
func variantUnits(m map[string]Unit, user, variant string) int64 {
	var q int64
	for _, u := range m {
		if u.User == user && u.Variant == variant {
			q += u.Qty
		}
	}
	return q
}

// units sums the quantities of user in m.
func units(m map[string]Unit, user string) int64 {
	var q int64
	for _, u := range m {
		if u.User == user {
			q += u.Qty
		}
	}
	return q
}
