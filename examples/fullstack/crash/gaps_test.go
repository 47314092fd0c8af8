package crash

import (
	"fmt"
	"testing"
	"time"
)

// The gaps the crash scenarios ran into, each reproduced without a crash
// and deterministically, on the embedded deployment (nothing to install).
// Both are closed; these tests keep them closed.

// TestRetryAfterSoldOut: a buyer whose answer was lost re-sends its buy
// (same request_id, token and path) after the sale sold out. The attempt
// reserved a unit, so the retry must get its reservation back (202 queued,
// or 200 with its result), never a refusal.
func TestRetryAfterSoldOut(t *testing.T) {
	r := newRig(t, rigConfig{seed: 0x61, stock: 2, users: 4})
	b1, b2, b3 := r.crowd.Buyer(1), r.crowd.Buyer(2), r.crowd.Buyer(3)
	if tok, buy := r.crowd.PageAttempt(r.ctx, b1); buy.Code != 202 {
		t.Fatalf("user 1: %s / %s, want a 202", tok.Key(), buy.Key())
	}
	won := b1.Attempts[len(b1.Attempts)-1]
	if tok, buy := r.crowd.PageAttempt(r.ctx, b2); buy.Code != 202 {
		t.Fatalf("user 2: %s / %s, want a 202", tok.Key(), buy.Key())
	}
	// The third buyer finds the sale sold out; the service learns it.
	if tok, buy := r.crowd.PageAttempt(r.ctx, b3); buy.Status != "sold_out" && tok.Status != "sold_out" {
		t.Fatalf("user 3: %s / %s, want sold_out", tok.Key(), buy.Key())
	}
	// User 1 lost the 202 and re-sends the same buy.
	again := r.crowd.Resend(r.ctx, b1, won)
	st := r.settle("sold out")
	o, hasOrder := st.Orders[won.Reservation]
	t.Logf("user 1 request_id %s: first answer 202 %s, resent: %s; the DB has an order for it: %v",
		won.RequestID, won.Reservation, again.Key(), hasOrder)
	if !hasOrder || o.UserID != "1" {
		t.Fatalf("reservation %s of user 1 has no order of user 1 (%+v)", won.Reservation, o)
	}
	accepted := again.Code == 202 || (again.Code == 200 && again.Reservation == won.Reservation)
	if !accepted {
		if again.Code == 409 && again.Status == "sold_out" {
			r.gap("a retry (same request_id) of an attempt that holds a reservation is answered 409 sold_out once the "+
				"process has seen the activity sold out: handleBuy refuses on stock.Deductor.SoldOut (per activity, "+
				"no request ID) before the request_id replay, although the reservation %s is an order (%s) — and "+
				"handleToken, which the page calls first, refuses on the same flag", won.Reservation, o.OrderNo)
		} else {
			t.Errorf("the retry of user 1's accepted attempt answered %s, want its reservation %s back", again.Key(), won.Reservation)
		}
	}
}

// TestNewAttemptAfterRelease: a buyer who spent its access token on an
// attempt that holds nothing (refused sold_out) starts a new attempt once a
// unit came back (an unpaid order cancelled). The page asks
// /api/activity/token first; neither that nor the buy may refuse the
// buyer as already_bought: it holds nothing.
func TestNewAttemptAfterRelease(t *testing.T) {
	r := newRig(t, rigConfig{seed: 0x62, stock: 1, users: 3, extra: []string{"-pay-timeout", "3s"}})
	b1, b2 := r.crowd.Buyer(1), r.crowd.Buyer(2)
	if tok, buy := r.crowd.PageAttempt(r.ctx, b1); buy.Code != 202 {
		t.Fatalf("user 1: %s / %s, want a 202", tok.Key(), buy.Key())
	}
	resv := b1.Attempts[len(b1.Attempts)-1].Reservation
	if tok, buy := r.crowd.PageAttempt(r.ctx, b2); buy.Status != "sold_out" {
		t.Fatalf("user 2: %s / %s, want the buy refused sold_out (its token spent)", tok.Key(), buy.Key())
	}
	// User 1 does not pay: the order is cancelled and the unit comes back.
	r.poll("user 1's unpaid order cancelled and its unit back in the DB", time.Minute, func() (bool, string) {
		st, err := r.store.Read(r.ctx)
		if err != nil {
			return false, err.Error()
		}
		o := st.Orders[resv]
		return o.Status == "CANCELLED" && st.DBStock == 1, fmt.Sprintf("order of %s: %q, DB stock %d", resv, o.Status, st.DBStock)
	})
	// The page's way: the token call, once the service no longer answers
	// sold_out (its in-process flag drops on the release).
	var tok Answer
	r.poll("the token call no longer answering sold_out", time.Minute, func() (bool, string) {
		tok = r.crowd.Token(r.ctx, b2)
		return tok.Status != "sold_out", tok.Key()
	})
	buy := r.crowd.DirectAttempt(r.ctx, b2) // with the token and path user 2 holds
	t.Logf("user 2 (spent token, holds nothing, a unit is back): token call %s, buy with its token %s", tok.Key(), buy.Key())
	if buy.Code != 202 {
		t.Errorf("user 2's new attempt answered %s, want a 202 (a unit is back and user 2 holds nothing)", buy.Key())
	}
	switch {
	case tok.Code == 200:
	case tok.Code == 409 && tok.Status == "already_bought":
		r.gap("/api/activity/token answers 409 already_bought to a buyer that spent its access token and holds nothing "+
			"(token.Pool.Take reports the token Used; handleToken refuses without asking stock what the buyer holds), "+
			"while the buy itself accepts the same buyer with that token (%s); the page asks for the token before "+
			"every attempt, so its buyer cannot try again", buy.Key())
	default:
		t.Errorf("the token call answered %s, want 200", tok.Key())
	}
	st := r.settle("after the new attempt")
	r.logState("final", st)
}
