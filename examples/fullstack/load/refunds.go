package load

import (
	"context"
	"fmt"
	"math"
)

// Payments and refunds of a run (Config.PayShare, RefundShare, Refund):
// the payers are spread evenly over the accepted attempts; every other
// one pays through the fake provider (POST /api/pay/fake: the signed
// callback), the others by POST /api/pay; a share of those told "paid" is
// refunded by the operator's Refund, restocked in turn to the sale, not
// at all and to the shop, and each buyer reads its result again (its last
// word is "refunded", checked against SQL). After refunds the counts are
// read again, so the invariants (check) count them: a refund to the sale
// is neither live nor cancelled, and its unit is back in the remaining
// stock; a refund without restock stays sold.

// restockTurn is the order refunds take their restock choices in.
var restockTurn = []string{"sale", "none", "shop"}

// payShare is Config.PayShare: 0 is the default, every third; below 0
// none.
func (c Config) payShare() float64 {
	switch {
	case c.PayShare == 0:
		return 1.0 / 3
	case c.PayShare < 0:
		return 0
	}
	return min(c.PayShare, 1)
}

// picked reports whether the i-th of a sequence is among an even spread
// of share of it, the first included: share 1/3 picks 0, 3, 6, …
func picked(i int, share float64) bool {
	return share > 0 && math.Ceil(float64(i)*share) != math.Ceil(float64(i+1)*share)
}

func (r *runner) payer(i int) bool { return picked(i, r.cfg.payShare()) }

// payPath: every other payment goes through the fake provider.
func payPath(i int) string {
	if i%2 == 0 {
		return "/api/pay/fake"
	}
	return "/api/pay"
}

// refunds refunds RefundShare of the payers told "paid" and reads their
// results again, then reads the counts again.
func (r *runner) refunds(ctx context.Context, payers []*attempt) error {
	if r.cfg.RefundShare <= 0 {
		return nil
	}
	if r.cfg.Refund == nil {
		r.rep.HistoryNote = joinNote(r.rep.HistoryNote, "no refunds: the run has no operator channel (Config.Refund)")
		return nil
	}
	var paid []*attempt
	for _, a := range payers {
		if a.last == "paid" {
			paid = append(paid, a)
		}
	}
	n := 0
	for i, a := range paid {
		if !picked(i, min(r.cfg.RefundShare, 1)) {
			continue
		}
		restock := restockTurn[n%len(restockTurn)]
		n++
		outcome := "ok"
		if err := r.cfg.Refund(ctx, a.orderNo, restock); err != nil {
			outcome = "error"
			r.rep.Violations = append(r.rep.Violations, fmt.Sprintf("refund of order %s (restock %s): %v", a.orderNo, restock, err))
		}
		r.rep.Refunded[restock+" "+outcome]++
		if _, err := r.c.result(ctx, a); err != nil {
			return err
		}
	}
	if n == 0 {
		return nil
	}
	iv, err := r.c.invariants(ctx)
	if err != nil {
		return err
	}
	r.rep.Server = iv
	return nil
}

func joinNote(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}
