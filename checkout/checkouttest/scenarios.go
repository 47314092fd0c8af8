package checkouttest

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/seckillkit/seckill/checkout"
	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/stock"
)

// scenario is one seam of the protocol: a sale to build, the faults it
// needs, what to send, what the answers must be. Every scenario ends with
// settle, which checks the invariants after the drain.
type scenario struct {
	name  string
	cfg   Config
	needs func(s *Sale) string // a skip reason, or ""
	run   func(k *kit)
}

var scenarios = []scenario{
	{name: "same_request_id", cfg: Config{Stock: 5, PerUserLimit: 2}, run: sameRequestID},
	{name: "uncertain_reserve", cfg: Config{Stock: 5, PerUserLimit: 3}, run: uncertainReserve},
	{name: "crash_after_token", cfg: Config{Stock: 5, PerUserLimit: 3}, needs: needsToken, run: crashAfterToken},
	{name: "lost_answer", cfg: Config{Stock: 5, PerUserLimit: 2}, run: lostAnswer},
	{name: "kafka_down", cfg: Config{Stock: 5, PerUserLimit: 1}, needs: needsKafka, run: kafkaDown},
	{name: "kafka_and_db_down", cfg: Config{Stock: 5, PerUserLimit: 1}, needs: needsHandoff, run: kafkaAndDBDown},
	{name: "frozen", cfg: Config{Stock: 5, PerUserLimit: 1}, needs: needsFreeze, run: frozen},
	{name: "paused", cfg: Config{Stock: 5, PerUserLimit: 1}, needs: needsPause, run: paused},
	{name: "sold_out", cfg: Config{Stock: 3, PerUserLimit: 1}, run: soldOut},
	{name: "other_buyer", cfg: Config{Stock: 5, PerUserLimit: 1}, run: otherBuyer},
	{name: "id_limits", cfg: Config{Stock: 5, PerUserLimit: 1}, run: idLimits},
	{name: "user_cap_1", cfg: Config{Stock: 10, PerUserLimit: 1}, run: userCap(6)},
	{name: "user_cap_3", cfg: Config{Stock: 10, PerUserLimit: 3}, run: userCap(8)},
	{name: "non_owner_result", cfg: Config{Stock: 5, PerUserLimit: 1}, run: nonOwnerResult},
	{name: "variant_sold_out", cfg: Config{PerUserLimit: 1, Variants: []stock.Variant{{ID: "S", Stock: 2}, {ID: "M", Stock: 3}, {ID: "L", Stock: 1}}},
		needs: needsVariants, run: variantSoldOut},
	{name: "variant_retry", cfg: Config{PerUserLimit: 2, Variants: []stock.Variant{{ID: "S", Stock: 3}, {ID: "M", Stock: 3}, {ID: "L", Stock: 0}}},
		needs: needsVariants, run: variantRetry},
	{name: "variant_cap", cfg: Config{PerUserLimit: 2, Variants: []stock.Variant{{ID: "S", Stock: 6, PerUserLimit: 1}, {ID: "M", Stock: 6}, {ID: "L", Stock: 6}}},
		needs: needsVariants, run: variantCap},
	{name: "variant_early_sold_out", cfg: Config{PerUserLimit: 1, Variants: []stock.Variant{{ID: "S", Stock: 1}, {ID: "M", Stock: 1}, {ID: "L", Stock: 0}}},
		needs: needsVariants, run: variantEarlySoldOut},
	{name: "variant_spent_token", cfg: Config{PerUserLimit: 2, Variants: []stock.Variant{{ID: "S", Stock: 2}, {ID: "M", Stock: 2}, {ID: "L", Stock: 0}}},
		needs: needsAll(needsVariants, needsToken), run: variantSpentToken},
	{name: "resend_during_undo", cfg: Config{Stock: 5, PerUserLimit: 2}, run: resendDuringUndo("")},
	{name: "variant_resend_during_undo", cfg: Config{PerUserLimit: 2, Variants: []stock.Variant{{ID: "S", Stock: 2}, {ID: "M", Stock: 2}}},
		needs: needsVariants, run: resendDuringUndo("M")},
	{name: "variant_handoff_failed", cfg: Config{PerUserLimit: 1, Variants: []stock.Variant{{ID: "S", Stock: 1}, {ID: "M", Stock: 2}}},
		needs: needsAll(needsVariants, needsHandoff), run: variantHandoffFailed},
}

// needsAll is the first skip reason of needs, or "".
func needsAll(needs ...func(*Sale) string) func(*Sale) string {
	return func(s *Sale) string {
		for _, n := range needs {
			if r := n(s); r != "" {
				return r
			}
		}
		return ""
	}
}

// needsVariants skips a variant scenario when the constructor built no
// variants (Config.Variants): its Counts name none.
func needsVariants(s *Sale) string {
	n, err := s.Counts(context.Background())
	if err == nil && n.VariantRemaining == nil {
		return "the sale has no variants (the constructor ignores Config.Variants, or Counts does not count them)"
	}
	return ""
}

func needsToken(s *Sale) string {
	if !hasStep(s.Checkout, checkout.StepToken) {
		return "no access_token step"
	}
	return ""
}

func needsKafka(s *Sale) string {
	if s.Faults.KafkaDown == nil {
		return "no Faults.KafkaDown"
	}
	return ""
}

func needsHandoff(s *Sale) string {
	if s.Faults.KafkaDown == nil || s.Faults.OutboxDown == nil {
		return "no Faults.KafkaDown and Faults.OutboxDown"
	}
	return ""
}

func needsFreeze(s *Sale) string {
	if s.Faults.Freeze == nil {
		return "no Faults.Freeze"
	}
	return ""
}

func needsPause(s *Sale) string {
	if s.Faults.Pause == nil {
		return "no Faults.Pause"
	}
	return ""
}

// expect fails unless o is of kind want (and, for a refusal, reason).
func (k *kit) expect(what string, o checkout.Outcome, want checkout.Kind, reason checkout.Reason) bool {
	k.t.Helper()
	if o.Kind != want || reason != "" && o.Reason != reason {
		k.t.Errorf("[expect] %s: want %s, got %s", what, strings.TrimSpace(want.String()+" "+string(reason)), describe(o))
		return false
	}
	return true
}

func describe(o checkout.Outcome) string {
	s := o.Kind.String()
	if o.Reason != "" {
		s += " " + string(o.Reason)
	}
	if o.Kind == checkout.Refused {
		s += fmt.Sprintf(" (final %v)", o.Final)
	}
	if o.Step != "" {
		s += " at " + o.Step
	}
	if o.Err != nil {
		s += ": " + o.Err.Error()
	}
	if o.Reservation != "" {
		s += " reservation " + o.Reservation
	}
	return s
}

// sameRequestID: one request ID sent by 8 goroutines at once, then again in
// sequence (each send with fresh captcha and link, the same access token):
// one unit, one order, every answer Accepted or Replayed with the same
// reservation. The cap is 2, so a second unit would fit.
func sameRequestID(k *kit) {
	const n = 8
	as := make([]checkout.Attempt, n)
	for i := range as {
		as[i] = k.attempt("alice", "same-1")
	}
	outs := k.concurrently(as)
	res := ""
	for i, o := range outs {
		if o.Kind != checkout.Accepted && o.Kind != checkout.Replayed {
			k.t.Errorf("[expect] concurrent send %d: want accepted or replayed, got %s", i, describe(o))
			continue
		}
		if res == "" {
			res = o.Reservation
		} else if o.Reservation != res {
			k.t.Errorf("[expect] concurrent send %d: reservation %q, another send got %q", i, o.Reservation, res)
		}
	}
	for i := range 3 {
		o := k.buy("alice", "same-1")
		if k.expect(fmt.Sprintf("sequential resend %d", i), o, checkout.Replayed, "") && res != "" && o.Reservation != res {
			k.t.Errorf("[expect] sequential resend %d: reservation %q, want %q", i, o.Reservation, res)
		}
	}
	n2 := k.settle()
	if h, l := units(n2.Held, "alice"), units(n2.Live, "alice"); h != 1 || l != 1 {
		k.t.Errorf("[expect] one request ID: alice holds %d units in Redis and %d in live orders, want 1 and 1", h, l)
	}
	o := k.buy("alice", "same-1")
	if k.expect("resend after the drain", o, checkout.Replayed, "") && o.Result.Status != order.StatusSuccess {
		k.t.Errorf("[expect] resend after the drain: result %q, want SUCCESS", o.Result.Status)
	}
}

// uncertainReserve: Reserve succeeded but the caller saw an error (the
// reply was lost); the retry of the same request ID gets that reservation,
// never a second unit (the cap is 3).
func uncertainReserve(k *kit) {
	k.faults.arm(k.faults.uncertain, "unsure-1")
	first := k.send(k.attempt("bob", "unsure-1"), true)
	if first.Kind != checkout.Busy || !strings.Contains(fmt.Sprint(first.Err), errUncertain.Error()) {
		k.t.Errorf("[expect] the attempt whose reserve reply is lost: want busy from the kit's fault, got %s", describe(first))
	}
	o := k.buy("bob", "unsure-1")
	if o.Kind != checkout.Accepted && o.Kind != checkout.Replayed {
		k.t.Errorf("[expect] retry after a lost reserve reply: want accepted or replayed, got %s", describe(o))
	} else if first.Reservation != "" && o.Reservation != first.Reservation {
		k.t.Errorf("[expect] retry after a lost reserve reply: reservation %q, the lost one was %q", o.Reservation, first.Reservation)
	}
	n := k.settle()
	if h, l := units(n.Held, "bob"), units(n.Live, "bob"); h != 1 || l != 1 {
		k.t.Errorf("[expect] lost reserve reply: bob holds %d units in Redis and %d in live orders, want 1 and 1", h, l)
	}
}

// crashAfterToken: the process dies between the access token and Reserve
// (the token spent, nothing reserved, nothing undone); the retry with the
// same token passes (the spent-token rule) and buys exactly one unit.
func crashAfterToken(k *kit) {
	k.faults.arm(k.faults.crash, "crash-1")
	first := k.send(k.attempt("carol", "crash-1"), true)
	if first.Kind != checkout.Refused || first.Reason != crashed {
		k.t.Fatalf("[expect] the crashed attempt: want the kit's crash, got %s", describe(first))
	}
	if n := k.counts(); units(n.Held, "carol") != 0 {
		k.t.Errorf("[expect] the crashed attempt holds %d units", units(n.Held, "carol"))
	}
	o := k.buy("carol", "crash-1")
	k.expect("retry with the spent token after a crash", o, checkout.Accepted, "")
	o = k.buy("carol", "crash-1")
	k.expect("second retry after a crash", o, checkout.Replayed, "")
	n := k.settle()
	if h, l := units(n.Held, "carol"), units(n.Live, "carol"); h != 1 || l != 1 {
		k.t.Errorf("[expect] crash after the token: carol holds %d units in Redis and %d in live orders, want 1 and 1", h, l)
	}
}

// lostAnswer: the hand-off succeeded and the answer was lost; the retry is
// Replayed with the same reservation, and there is one order.
func lostAnswer(k *kit) {
	first := k.buy("dave", "lost-1") // the buyer never sees this answer
	k.expect("the attempt whose answer is lost", first, checkout.Accepted, "")
	o := k.buy("dave", "lost-1")
	if k.expect("retry after a lost answer", o, checkout.Replayed, "") && o.Reservation != first.Reservation {
		k.t.Errorf("[expect] retry after a lost answer: reservation %q, want %q", o.Reservation, first.Reservation)
	}
	n := k.settle()
	if l := units(n.Live, "dave"); l != 1 {
		k.t.Errorf("[expect] lost answer: dave has %d units in live orders, want 1", l)
	}
	o = k.buy("dave", "lost-1")
	if k.expect("retry after the drain", o, checkout.Replayed, "") && o.Result.Status != order.StatusSuccess {
		k.t.Errorf("[expect] retry after the drain: result %q, want SUCCESS", o.Result.Status)
	}
}

// kafkaDown: the publisher fails; the outbox takes the order, which is
// created once Kafka is back.
func kafkaDown(k *kit) {
	k.sale.Faults.KafkaDown(true)
	o := k.buy("erin", "kafka-1")
	k.expect("an attempt while Kafka is down", o, checkout.Accepted, "")
	k.sale.Faults.KafkaDown(false)
	n := k.settle()
	if l := units(n.Live, "erin"); l != 1 {
		k.t.Errorf("[expect] Kafka down: erin has %d units in live orders, want 1", l)
	}
}

// kafkaAndDBDown: the hand-off fails (handoff.ErrRetry): the attempt is
// refused retryable, its reservation released, its access token given back,
// its result FAILED for its owner; a later attempt buys.
func kafkaAndDBDown(k *kit) {
	k.sale.Faults.KafkaDown(true)
	k.sale.Faults.OutboxDown(true)
	o := k.buy("fay", "down-1")
	k.expect("an attempt while Kafka and the DB are down", o, checkout.Refused, checkout.HandoffFailed)
	if o.Final {
		k.t.Errorf("[expect] hand-off failure: refused final, want retryable")
	}
	k.sale.Faults.KafkaDown(false)
	k.sale.Faults.OutboxDown(false)
	if n := k.counts(); units(n.Held, "fay") != 0 {
		k.t.Errorf("[expect] hand-off failure: fay holds %d units", units(n.Held, "fay"))
	}
	again := k.buy("fay", "down-1")
	if again.Kind == checkout.Accepted || again.Kind == checkout.Replayed {
		k.t.Errorf("[expect] retry of the released attempt: want refused (released), got %s", describe(again))
	}
	later := k.buy("fay", "down-2")
	k.expect("a later attempt", later, checkout.Accepted, "")
	n := k.settle()
	if l := units(n.Live, "fay"); l != 1 {
		k.t.Errorf("[expect] Kafka and DB down: fay has %d units in live orders, want 1", l)
	}
	if o.Reservation != "" {
		res, err := k.sale.Checkout.Result(k.ctx, "fay", o.Reservation)
		if err != nil || res.Status != order.StatusFailed {
			k.t.Errorf("[expect] the released reservation %q reads %q (%v) for its owner, want FAILED", o.Reservation, res.Status, err)
		}
	}
}

// frozen: Redis lost the sale's state and it is frozen for the rebuild: a
// new attempt is refused retryable (busy), a winner's retry still gets its
// reservation, and after the thaw the refused attempt buys.
func frozen(k *kit) {
	won := k.buy("gus", "frz-1")
	k.expect("an attempt before the freeze", won, checkout.Accepted, "")
	if err := k.sale.Faults.Freeze(k.ctx, true); err != nil {
		k.t.Fatalf("checkouttest: Faults.Freeze(true): %v", err)
	}
	o := k.buy("hal", "frz-2")
	k.expect("an attempt while frozen", o, checkout.Refused, checkout.TryAgain)
	if o.Final {
		k.t.Errorf("[expect] frozen: refused final, want retryable")
	}
	again := k.buy("gus", "frz-1")
	k.expect("a winner's retry while frozen", again, checkout.Replayed, "")
	if err := k.sale.Faults.Freeze(k.ctx, false); err != nil {
		k.t.Fatalf("checkouttest: Faults.Freeze(false): %v", err)
	}
	o = k.buy("hal", "frz-2")
	k.expect("the refused attempt after the thaw", o, checkout.Accepted, "")
	n := k.settle()
	if l := units(n.Live, "gus") + units(n.Live, "hal"); l != 2 {
		k.t.Errorf("[expect] frozen: %d units in live orders of gus and hal, want 2", l)
	}
}

// paused: a paused sale refuses Paused (retryable), never SoldOut; after
// the resume the same attempt buys.
func paused(k *kit) {
	if err := k.sale.Faults.Pause(k.ctx, true); err != nil {
		k.t.Fatalf("checkouttest: Faults.Pause(true): %v", err)
	}
	o := k.buy("ida", "pause-1")
	k.expect("an attempt while paused", o, checkout.Refused, checkout.Paused)
	if o.Final {
		k.t.Errorf("[expect] paused: refused final, want retryable")
	}
	if err := k.sale.Faults.Pause(k.ctx, false); err != nil {
		k.t.Fatalf("checkouttest: Faults.Pause(false): %v", err)
	}
	o = k.buy("ida", "pause-1")
	k.expect("the paused attempt after the resume", o, checkout.Accepted, "")
	n := k.settle()
	if l := units(n.Live, "ida"); l != 1 {
		k.t.Errorf("[expect] paused: ida has %d units in live orders, want 1", l)
	}
}

// soldOut: 8 buyers race for 3 units: 3 win, 5 are refused SoldOut; each
// winner's retry is Replayed with its reservation, each loser's new
// attempt is SoldOut.
func soldOut(k *kit) {
	users := make([]string, 8)
	as := make([]checkout.Attempt, len(users))
	for i := range users {
		users[i] = fmt.Sprintf("buyer%d", i)
		as[i] = k.attempt(users[i], "so-1")
	}
	outs := k.concurrently(as)
	won := 0
	for i, o := range outs {
		switch {
		case o.Kind == checkout.Accepted:
			won++
		case o.Kind != checkout.Refused || o.Reason != checkout.SoldOut || !o.Final:
			k.t.Errorf("[expect] %s racing for the stock: want accepted or sold_out, got %s", users[i], describe(o))
		}
	}
	if won != int(k.cfg.Stock) {
		k.t.Errorf("[expect] %d winners for %d units", won, k.cfg.Stock)
	}
	for i, o := range outs {
		if o.Kind == checkout.Accepted {
			r := k.buy(users[i], "so-1")
			if k.expect(users[i]+"'s retry (a winner)", r, checkout.Replayed, "") && r.Reservation != o.Reservation {
				k.t.Errorf("[expect] %s's retry: reservation %q, want %q", users[i], r.Reservation, o.Reservation)
			}
		} else {
			k.expect(users[i]+"'s new attempt (a loser)", k.buy(users[i], "so-2"), checkout.Refused, checkout.SoldOut)
		}
	}
	n := k.settle()
	if n.RedisRemaining != 0 || len(n.Live) != int(k.cfg.Stock) {
		k.t.Errorf("[expect] sold out: Redis remaining %d, %d live orders; want 0 and %d", n.RedisRemaining, len(n.Live), k.cfg.Stock)
	}
}

// otherBuyer: IDs are per user. bob sending ann's request ID gets his own
// reservation; "ann-x" sending "r1" (which a rule without the length
// prefix would confuse with ann's "x-r1") gets its own; nobody reads
// another buyer's reservation.
func otherBuyer(k *kit) {
	a := k.buy("ann", "x-r1")
	k.expect("ann's attempt", a, checkout.Accepted, "")
	b := k.buy("bob", "x-r1")
	if k.expect("bob sending ann's request ID", b, checkout.Accepted, "") && b.Reservation == a.Reservation {
		k.t.Errorf("[expect] bob sending ann's request ID got ann's reservation %q", a.Reservation)
	}
	c := k.buy("ann-x", "r1")
	if k.expect(`"ann-x" sending "r1"`, c, checkout.Accepted, "") && (c.Reservation == a.Reservation || c.Reservation == b.Reservation) {
		k.t.Errorf("[expect] \"ann-x\" sending \"r1\" got another buyer's reservation %q", c.Reservation)
	}
	k.notReadable(map[string]string{a.Reservation: "ann", b.Reservation: "bob", c.Reservation: "ann-x"})
	n := k.settle()
	for _, u := range []string{"ann", "bob", "ann-x"} {
		if l := units(n.Live, u); l != 1 {
			k.t.Errorf("[expect] other buyer: %s has %d units in live orders, want 1", u, l)
		}
	}
	k.notReadable(map[string]string{a.Reservation: "ann", b.Reservation: "bob", c.Reservation: "ann-x"})
}

// notReadable checks that each reservation reads as unknown for everyone but
// its owner.
func (k *kit) notReadable(owners map[string]string) {
	k.t.Helper()
	readers := []string{"ann", "bob", "ann-x", "mallory"}
	for r, owner := range owners {
		if r == "" {
			continue
		}
		for _, u := range readers {
			if u == owner {
				continue
			}
			res, err := k.sale.Checkout.Result(k.ctx, u, r)
			if err != nil || res.Status != order.StatusNone {
				k.t.Errorf("[expect] %s reading %s's reservation %q: got %q (%v), want nothing", u, owner, r, res.Status, err)
			}
		}
	}
}

// idLimits: a 64-byte user ID with a 40-byte request ID is accepted and
// ordered; a 41-byte request ID is refused BadRequest with nothing
// reserved.
func idLimits(k *kit) {
	long := strings.Repeat("u", 60) + "-9.@"
	other := strings.Repeat("v", 60) + "+1.x"
	req40, req41 := strings.Repeat("R", 39)+"-", strings.Repeat("q", 41)
	o := k.buy(long, req40)
	k.expect("64-byte user, 40-byte request ID", o, checkout.Accepted, "")
	bad := k.buy(other, req41)
	k.expect("41-byte request ID", bad, checkout.Refused, checkout.BadRequest)
	if bad.Reservation != "" {
		k.t.Errorf("[expect] 41-byte request ID: reservation %q set", bad.Reservation)
	}
	n := k.settle()
	if l := units(n.Live, long); l != 1 {
		k.t.Errorf("[expect] 64-byte user: %d units in live orders, want 1", l)
	}
	if h := units(n.Held, other); h != 0 {
		k.t.Errorf("[expect] 41-byte request ID: %d units held", h)
	}
}

// userCap: one buyer's n concurrent attempts with distinct request IDs
// never hold more than the cap, in Redis or in the DB.
func userCap(n int) func(k *kit) {
	return func(k *kit) {
		as := make([]checkout.Attempt, n)
		for i := range as {
			as[i] = k.attempt("jo", fmt.Sprintf("cap-%d", i))
		}
		outs := k.concurrently(as)
		won := 0
		for i, o := range outs {
			switch {
			case o.Kind == checkout.Accepted:
				won++
			case o.Kind == checkout.Refused && o.Final && o.Reason == checkout.AlreadyBought:
			default:
				k.t.Errorf("[expect] concurrent attempt %d at cap %d: want accepted or already_bought, got %s", i, k.cfg.PerUserLimit, describe(o))
			}
		}
		if won < 1 || int64(won) > k.cfg.PerUserLimit {
			k.t.Errorf("[expect] %d attempts accepted at cap %d", won, k.cfg.PerUserLimit)
		}
		c := k.settle()
		if h, l := units(c.Held, "jo"), units(c.Live, "jo"); h != int64(won) || l != int64(won) {
			k.t.Errorf("[expect] cap %d: jo holds %d units in Redis and %d in live orders, %d accepted", k.cfg.PerUserLimit, h, l, won)
		}
	}
}

// nonOwnerResult: a buyer reads their own result, before and after the
// drain; nobody else does.
func nonOwnerResult(k *kit) {
	o := k.buy("kim", "own-1")
	k.expect("kim's attempt", o, checkout.Accepted, "")
	// Before the drain the order may exist already (a composition whose
	// consumer runs in the buy) or not yet.
	check := func(when string, want ...order.Status) {
		res, err := k.sale.Checkout.Result(k.ctx, "kim", o.Reservation)
		if err != nil || !slices.Contains(want, res.Status) || res.User != "" && res.User != "kim" {
			k.t.Errorf("[expect] kim reading her reservation %s: %q for %q (%v), want one of %q", when, res.Status, res.User, err, want)
		}
		for _, u := range []string{"lee", "kim2", "ki", ""} {
			res, err := k.sale.Checkout.Result(k.ctx, u, o.Reservation)
			if err != nil || res.Status != order.StatusNone {
				k.t.Errorf("[expect] %q reading kim's reservation %s: %q (%v), want nothing", u, when, res.Status, err)
			}
		}
	}
	check("before the drain", order.StatusQueued, order.StatusSuccess)
	k.settle()
	check("after the drain", order.StatusSuccess)
}

// variantSoldOut: 8 buyers race for size S (2 units): 2 win, 6 are
// refused sold_out while M and L still sell; each loser then buys M (3
// units) or L (1) in turn until those sell out too. Every winner's retry
// is Replayed, no variant is oversold (counted per variant from Redis and
// SQL at the settle), and a sold_out answer for a variant is given only
// when that variant has nothing left.
func variantSoldOut(k *kit) {
	users := make([]string, 8)
	as := make([]checkout.Attempt, len(users))
	for i := range users {
		users[i] = fmt.Sprintf("buyer%d", i)
		as[i] = k.attemptAt(users[i], "vs-1", "S")
	}
	outs := k.concurrently(as)
	won := map[string]checkout.Outcome{}
	var losers []string
	for i, o := range outs {
		switch {
		case o.Kind == checkout.Accepted:
			won[users[i]] = o
		case o.Kind == checkout.Refused && o.Reason == checkout.SoldOut && o.Final:
			losers = append(losers, users[i])
		default:
			k.t.Errorf("[expect] %s racing for S: want accepted or sold_out, got %s", users[i], describe(o))
		}
	}
	if len(won) != 2 {
		k.t.Errorf("[expect] %d winners of S for 2 units", len(won))
	}
	for u, o := range won {
		r := k.buyAt(u, "vs-1", "S")
		if k.expect(u+"'s retry of S (a winner)", r, checkout.Replayed, "") && r.Reservation != o.Reservation {
			k.t.Errorf("[expect] %s's retry of S: reservation %q, want %q", u, r.Reservation, o.Reservation)
		}
	}
	// S is gone; M (3) and L (1) sell to the losers, then are gone too.
	left := map[string]int{"M": 3, "L": 1}
	for i, u := range losers {
		k.expect(u+"'s new attempt at S", k.buyAt(u, "vs-2", "S"), checkout.Refused, checkout.SoldOut)
		v := "M"
		if i%2 == 1 {
			v = "L"
		}
		o := k.buyAt(u, "vs-3", v)
		if left[v] > 0 {
			if k.expect(fmt.Sprintf("%s buying %s (%d left)", u, v, left[v]), o, checkout.Accepted, "") {
				left[v]--
			}
		} else {
			k.expect(fmt.Sprintf("%s buying %s (none left)", u, v), o, checkout.Refused, checkout.SoldOut)
		}
	}
	n := k.settle()
	for _, v := range []string{"S", "M", "L"} {
		want := map[string]int64{"S": 0, "M": int64(left["M"]), "L": int64(left["L"])}[v]
		if n.VariantRemaining[v] != want || n.VariantDBRemaining[v] != want {
			k.t.Errorf("[expect] variant %s: Redis remaining %d, DB remaining %d; want %d", v, n.VariantRemaining[v], n.VariantDBRemaining[v], want)
		}
	}
	for u := range won {
		if l := variantUnits(n.Live, u, "S"); l != 1 {
			k.t.Errorf("[expect] %s won S: %d units of S in live orders, want 1", u, l)
		}
	}
}

// variantRetry: one request ID sent at S by 6 goroutines at once, then in
// sequence: one unit of S, one order, every answer the same reservation.
// The same request ID naming M is another attempt (the rule of
// checkout.Attempt.Variant), never S's reservation; alice's access token
// is spent and she holds S, so it is refused already_bought (the token is
// the sale's). carl, refused sold_out at L (nothing held, his token
// spent), sends the same request ID at M: another attempt, its own
// reservation and an order for M, never L's. A variant the sale does not
// have is refused bad_request (final), holding nothing. After the drain
// each retry reads its own variant's outcome.
func variantRetry(k *kit) {
	as := make([]checkout.Attempt, 6)
	for i := range as {
		as[i] = k.attemptAt("alice", "vr-1", "S")
	}
	res := ""
	for i, o := range k.concurrently(as) {
		if o.Kind != checkout.Accepted && o.Kind != checkout.Replayed {
			k.t.Errorf("[expect] concurrent send %d at S: want accepted or replayed, got %s", i, describe(o))
			continue
		}
		if res == "" {
			res = o.Reservation
		} else if o.Reservation != res {
			k.t.Errorf("[expect] concurrent send %d at S: reservation %q, another send got %q", i, o.Reservation, res)
		}
	}
	for i := range 2 {
		o := k.buyAt("alice", "vr-1", "S")
		if k.expect(fmt.Sprintf("sequential resend %d at S", i), o, checkout.Replayed, "") && o.Reservation != res {
			k.t.Errorf("[expect] sequential resend %d at S: reservation %q, want %q", i, o.Reservation, res)
		}
	}
	am := k.buyAt("alice", "vr-1", "M")
	k.expect("the same request ID naming M, the sale's token spent", am, checkout.Refused, checkout.AlreadyBought)
	if am.Reservation == res {
		k.t.Errorf("[variant] the same request ID naming M was answered with S's reservation %q", res)
	}
	l := k.buyAt("carl", "vr-9", "L")
	k.expect("carl at L (no stock)", l, checkout.Refused, checkout.SoldOut)
	m := k.buyAt("carl", "vr-9", "M")
	if k.expect("carl's request ID naming M", m, checkout.Accepted, "") && l.Reservation != "" && m.Reservation == l.Reservation {
		k.t.Errorf("[variant] carl's request ID naming M got L's reservation %q", l.Reservation)
	}
	if again := k.buyAt("carl", "vr-9", "M"); k.expect("its resend", again, checkout.Replayed, "") && again.Reservation != m.Reservation {
		k.t.Errorf("[expect] the resend naming M: reservation %q, want %q", again.Reservation, m.Reservation)
	}
	bad := k.buyAt("bob", "vr-2", "XL")
	if k.expect("a variant the sale does not have", bad, checkout.Refused, checkout.BadRequest) && !bad.Final {
		k.t.Errorf("[expect] an unknown variant: refused retryable, want final")
	}
	n := k.settle()
	if s, mm := variantUnits(n.Live, "alice", "S"), variantUnits(n.Live, "alice", "M"); s != 1 || mm != 0 {
		k.t.Errorf("[expect] alice has %d units of S and %d of M in live orders, want 1 and 0", s, mm)
	}
	if mm, ll := variantUnits(n.Live, "carl", "M"), variantUnits(n.Live, "carl", "L"); mm != 1 || ll != 0 {
		k.t.Errorf("[expect] carl has %d units of M and %d of L in live orders, want 1 and 0", mm, ll)
	}
	if h := units(n.Held, "bob"); h != 0 {
		k.t.Errorf("[expect] bob's unknown variant: %d units held", h)
	}
	if o := k.buyAt("carl", "vr-9", "L"); o.Kind != checkout.Refused || !o.Final || o.Reservation == m.Reservation {
		k.t.Errorf("[variant] carl's resend at L after the drain: want refused (final), never M's reservation %q; got %s", m.Reservation, describe(o))
	}
	for v, r := range map[string]string{"S": res, "M": m.Reservation} {
		who := map[string]string{"S": "alice", "M": "carl"}[v]
		o := k.buyAt(who, "vr-"+map[string]string{"S": "1", "M": "9"}[v], v)
		if !k.expect("the resend at "+v+" after the drain", o, checkout.Replayed, "") {
			continue
		}
		if o.Reservation != r || o.Result.Status != order.StatusSuccess {
			k.t.Errorf("[expect] the resend at %s after the drain: reservation %q result %q, want %q SUCCESS", v, o.Reservation, o.Result.Status, r)
		}
		if len(o.Result.Lines) != 1 || !strings.HasSuffix(o.Result.Lines[0].ActivityID, "/"+v) {
			k.t.Errorf("[variant] the resend at %s after the drain reads the lines %+v", v, o.Result.Lines)
		}
	}
}

// variantCap: S's own cap is 1, the sale's 2 over all variants. One
// buyer's 10 concurrent attempts (distinct request IDs: 4 at S, 4 at M, 2
// at L) with the buyer's one access token: the token passes an attempt
// only while the buyer holds nothing in the sale (the spent-token rule
// adds every variant), so how many win depends on the race — at least 1,
// never more than the sale's cap, and at most 1 of S. Held in Redis and
// in the live orders (the settle counts each variant's cap and the
// sale's). Then, holding a unit, the buyer's new attempt at a variant it
// holds nothing of is refused: the spent token is the sale's.
func variantCap(k *kit) {
	var as []checkout.Attempt
	var at []string
	for v, n := range map[string]int{"S": 4, "M": 4, "L": 2} {
		for i := range n {
			as = append(as, k.attemptAt("jo", fmt.Sprintf("vc-%s-%d", v, i), v))
			at = append(at, v)
		}
	}
	won := map[string]int{}
	total := 0
	for i, o := range k.concurrently(as) {
		switch {
		case o.Kind == checkout.Accepted:
			won[at[i]]++
			total++
		case o.Kind == checkout.Refused && o.Final && o.Reason == checkout.AlreadyBought:
		default:
			k.t.Errorf("[expect] jo's attempt %d at %s: want accepted or already_bought, got %s", i, at[i], describe(o))
		}
	}
	if total < 1 || int64(total) > k.cfg.PerUserLimit || won["S"] > 1 {
		k.t.Errorf("[expect] jo won %v (%d units): want 1 to %d, at most 1 of S", won, total, k.cfg.PerUserLimit)
	}
	for _, v := range []string{"S", "M", "L"} {
		if won[v] > 0 {
			continue
		}
		k.expect("jo's new attempt at "+v+" with the sale's spent token", k.buyAt("jo", "vc-new-"+v, v), checkout.Refused, checkout.AlreadyBought)
		break
	}
	n := k.settle()
	if h, l := units(n.Held, "jo"), units(n.Live, "jo"); h != int64(total) || l != int64(total) {
		k.t.Errorf("[expect] jo holds %d units in Redis and %d in live orders, want %d and %d (accepted)", h, l, total, total)
	}
	if s := variantUnits(n.Live, "jo", "S"); s > 1 {
		k.t.Errorf("[expect] jo has %d units of S in live orders, want at most 1 (its cap)", s)
	}
}

// variantHandoffFailed: Kafka and the outbox down, a variant attempt's
// hand-off fails: refused retryable, its unit of S released through the
// fence (the order's line "<id>#0" in S's ledger), its access token given
// back, its result FAILED for its owner; the last unit of S then sells to
// a later attempt, and a retry of the failed one is not a second unit.
func variantHandoffFailed(k *kit) {
	k.sale.Faults.KafkaDown(true)
	k.sale.Faults.OutboxDown(true)
	o := k.buyAt("fay", "vdown-1", "S")
	k.expect("a variant attempt while Kafka and the DB are down", o, checkout.Refused, checkout.HandoffFailed)
	k.sale.Faults.KafkaDown(false)
	k.sale.Faults.OutboxDown(false)
	if n := k.counts(); variantUnits(n.Held, "fay", "S") != 0 || n.VariantRemaining["S"] != 1 {
		k.t.Errorf("[expect] hand-off failure: fay holds %d units of S, S has %d left; want 0 and 1", variantUnits(n.Held, "fay", "S"), n.VariantRemaining["S"])
	}
	if again := k.buyAt("fay", "vdown-1", "S"); again.Kind == checkout.Accepted || again.Kind == checkout.Replayed {
		k.t.Errorf("[expect] retry of the released variant attempt: want refused (released), got %s", describe(again))
	}
	later := k.buyAt("fay", "vdown-2", "S")
	k.expect("a later attempt at S", later, checkout.Accepted, "")
	n := k.settle()
	if l := variantUnits(n.Live, "fay", "S"); l != 1 {
		k.t.Errorf("[expect] fay has %d units of S in live orders, want 1", l)
	}
	if o.Reservation != "" {
		res, err := k.sale.Checkout.Result(k.ctx, "fay", o.Reservation)
		if err != nil || res.Status != order.StatusFailed {
			k.t.Errorf("[expect] the released variant reservation %q reads %q (%v) for its owner, want FAILED", o.Reservation, res.Status, err)
		}
	}
}

// soldOutFor is the sale's Checkout.SoldOutFor(user), the refusal a
// handler makes before reading the body, checked against the counts: it
// may be true only while nothing is left (in every variant of a sale with
// variants) and user holds nothing.
func (k *kit) soldOutFor(user string) bool {
	k.t.Helper()
	early := k.sale.Checkout.SoldOutFor(user)
	if !early {
		return false
	}
	n := k.counts()
	for v, left := range n.VariantRemaining {
		if left > 0 {
			k.t.Errorf("[truth] SoldOutFor(%s) refuses before the body while %d units of %s remain", user, left, v)
		}
	}
	if n.RedisRemaining > 0 && n.VariantRemaining == nil {
		k.t.Errorf("[truth] SoldOutFor(%s) refuses before the body while %d units remain", user, n.RedisRemaining)
	}
	if h := units(n.Held, user); h > 0 {
		k.t.Errorf("[truth] SoldOutFor(%s) refuses before the body a buyer holding %d units: its retry would never get its reservation back", user, h)
	}
	return true
}

// variantEarlySoldOut: the early refusal of a sale in sizes
// (Checkout.SoldOutFor, from the stock's SoldOut and SoldOutForPrefix of
// the sale): never while a size has units left, never for a buyer who won
// a size (whose retry must get its reservation back), and, once every
// size is sold out, only for buyers who hold nothing. ann wins S, bob M
// (L has none); carl is refused at each size. A stock without an
// in-process cache may never refuse early: that is allowed.
func variantEarlySoldOut(k *kit) {
	a := k.buyAt("ann", "ve-1", "S")
	k.expect("ann buys S", a, checkout.Accepted, "")
	k.expect("carl at S (none left)", k.buyAt("carl", "ve-1", "S"), checkout.Refused, checkout.SoldOut)
	k.expect("carl at L (no stock)", k.buyAt("carl", "ve-2", "L"), checkout.Refused, checkout.SoldOut)
	for _, u := range []string{"carl", "dave", "ann"} {
		k.soldOutFor(u) // M still sells: the check fails any early refusal
	}
	b := k.buyAt("bob", "ve-1", "M")
	k.expect("bob buys M", b, checkout.Accepted, "")
	k.expect("carl at M (none left)", k.buyAt("carl", "ve-3", "M"), checkout.Refused, checkout.SoldOut)
	for _, u := range []string{"ann", "bob"} {
		k.soldOutFor(u) // winners: any early refusal is reported
	}
	for _, u := range []string{"carl", "dave"} {
		early := k.soldOutFor(u)
		o := k.buyAt(u, "ve-9", "M")
		k.expect(u+"'s new attempt, every size sold out (early refusal "+fmt.Sprint(early)+")", o, checkout.Refused, checkout.SoldOut)
	}
	for u, o := range map[string]checkout.Outcome{"ann": a, "bob": b} {
		v := map[string]string{"ann": "S", "bob": "M"}[u]
		r := k.buyAt(u, "ve-1", v)
		if k.expect(u+"'s retry, every size sold out", r, checkout.Replayed, "") && r.Reservation != o.Reservation {
			k.t.Errorf("[expect] %s's retry: reservation %q, want %q", u, r.Reservation, o.Reservation)
		}
	}
	n := k.settle()
	for _, u := range []string{"ann", "bob", "carl", "dave"} {
		k.soldOutFor(u)
	}
	if n.RedisRemaining != 0 || len(n.Live) != 2 {
		k.t.Errorf("[expect] every size sold out: Redis remaining %d, %d live orders; want 0 and 2", n.RedisRemaining, len(n.Live))
	}
}

// variantSpentToken: the access token is the sale's, and a spent one
// passes only while the buyer holds nothing in any size. checkout asks
// that as one Stock.Held of the sale, which for a sale in sizes must be
// the sum over its sizes ("[held]": a Held of one ledger, or 0 for the
// sale, lets a spent token buy a second size; an error tells a buyer who
// holds a unit to retry). ann holds S: her spent token is refused at M
// (units left) and at L (none), before and after the drain. bob, refused
// at L (his token spent, nothing held), buys M with it.
func variantSpentToken(k *kit) {
	k.expect("ann buys S", k.buyAt("ann", "vt-1", "S"), checkout.Accepted, "")
	for i, v := range []string{"M", "L", "S"} {
		o := k.buyAt("ann", fmt.Sprintf("vt-%d", 2+i), v)
		if o.Kind != checkout.Refused || o.Reason != checkout.AlreadyBought || !o.Final {
			k.t.Errorf("[held] ann holds a unit of S; her new attempt at %s with the sale's spent token: want refused already_bought (final), got %s "+
				"(checkout.Stock.Held of the sale must be what she holds over all its sizes)", v, describe(o))
		}
	}
	k.expect("bob at L (no stock)", k.buyAt("bob", "vt-1", "L"), checkout.Refused, checkout.SoldOut)
	if o := k.buyAt("bob", "vt-2", "M"); o.Kind != checkout.Accepted {
		k.t.Errorf("[held] bob holds nothing; his attempt at M with the sale's spent token: want accepted, got %s "+
			"(checkout.Stock.Held of the sale must be 0 for a buyer holding no size)", describe(o))
	}
	n := k.settle()
	if o := k.buyAt("ann", "vt-9", "M"); o.Kind != checkout.Refused || o.Reason != checkout.AlreadyBought {
		k.t.Errorf("[held] after the drain, ann (an order for S) at M with the spent token: want refused already_bought, got %s", describe(o))
	}
	if s, m := variantUnits(n.Live, "ann", "S"), variantUnits(n.Live, "ann", "M"); s != 1 || m != 0 {
		k.t.Errorf("[expect] ann has %d units of S and %d of M in live orders, want 1 and 0", s, m)
	}
	if m := variantUnits(n.Live, "bob", "M"); m != 1 {
		k.t.Errorf("[expect] bob has %d units of M in live orders, want 1", m)
	}
}

// resendDuringUndo: an attempt reserves, then a step after reserve holds it
// and ends it Busy, so the loop undoes its reservation; meanwhile a resend
// of the same attempt found the reservation held and handed it off again.
// The undo must not give back the units the resend's order needs. gina's
// undo runs before the resend's message is consumed: released through the
// fence (checkout.Config.Fence) the message is answered FAILED, while a
// plain release leaves a live order without its units (settle's
// [conserved]). hank's runs after the pipeline drained: his order exists
// and keeps its units. variant "" is the sale's own activity.
func resendDuringUndo(variant string) func(k *kit) {
	return func(k *kit) {
		for _, c := range []struct {
			user       string
			drainFirst bool
		}{{"gina", false}, {"hank", true}} {
			h := k.faults.armHold("undo-1")
			a := k.attemptAt(c.user, "undo-1", variant)
			first := make(chan checkout.Outcome, 1)
			// Buy alone on the goroutine: the kit's checks (which may stop
			// the test) run on the test's goroutine, below.
			go func() { first <- k.sale.Checkout.Buy(k.ctx, &a) }()
			select {
			case <-h.reached:
			case o := <-first:
				k.t.Fatalf("[expect] %s: the held attempt ended before the step after reserve: %s", c.user, describe(o))
			}
			resend := k.buyAt(c.user, "undo-1", variant) // finds the reservation held: handed off again
			if resend.Kind != checkout.Accepted && resend.Kind != checkout.Replayed {
				k.t.Errorf("[expect] %s: the resend while the first send is held: want accepted or replayed, got %s", c.user, describe(resend))
			}
			if c.drainFirst { // the resend's order is made before the undo
				if err := k.sale.Drain(k.ctx); err != nil {
					k.t.Fatalf("checkouttest: Sale.Drain: %v", err)
				}
			}
			close(h.proceed)
			o := <-first
			k.record(&a, o)
			if u, ok := k.counts().Held[o.Reservation]; ok && u.User == a.User {
				k.mu.Lock()
				k.owner[o.Reservation] = a.User // kept: it must end as an order or FAILED
				k.mu.Unlock()
			}
			if o.Kind != checkout.Busy || !strings.Contains(fmt.Sprint(o.Err), errHeld.Error()) {
				k.t.Errorf("[expect] %s: the held attempt: want busy from the kit's step after reserve, got %s", c.user, describe(o))
			}
			n := k.settle() // [conserved]: an order of the resend's message must keep its units
			if h, l := units(n.Held, c.user), units(n.Live, c.user); h != l || l > 1 || c.drainFirst && l != 1 {
				k.t.Errorf("[expect] %s: resend during the undo: %d units held in Redis and %d in live orders", c.user, h, l)
			}
			again := k.buyAt(c.user, "undo-1", variant) // told what became of it: its order, or released
			if again.Kind == checkout.Accepted {
				k.t.Errorf("[expect] %s: the attempt again after the drain: want its outcome, got %s", c.user, describe(again))
			}
		}
		k.settle()
	}
}
