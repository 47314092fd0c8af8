package app

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/order/status"
)

// Results: what became of a reservation, and paying for the order.

type resultView struct {
	Status      string `json:"status"` // queued | created | paid | refunded | cancelled | failed | unknown
	Reservation string `json:"reservation,omitempty"`
	OrderNo     string `json:"order_no,omitempty"`
	Reason      string `json:"reason,omitempty"`
	// Variant is the size (variant) the reservation holds, for a sale
	// with variants (variants.go); absent otherwise.
	Variant string `json:"variant,omitempty"`
	// owner is the buyer the view belongs to (never sent): the push hub
	// hands a view only to its owner's streams.
	owner string
}

func (v resultView) final() bool {
	return v.Status != "queued" && v.Status != "unknown" && v.Status != ""
}

// resultOf answers for one reservation of the user (or, without one, for
// the user's latest): checkout.Result, so the database decides whenever it
// knows the reservation (an order, or a FAILED outcome such as a fenced
// release) and the answer never contradicts it; a reservation the database
// does not know yet is read from the stock ledger (held = still queued,
// released = failed; absent or another user's = unknown). The hand-off
// writes no QUEUED result (build.go), so the ledger is what says queued.
func (a *App) resultOf(ctx context.Context, user string, resv string) (resultView, error) {
	if resv == "" {
		res, err := a.p.results.Get(ctx, a.sale.act.ID, user)
		if err != nil {
			return resultView{}, err
		}
		return a.view(ctx, res), nil
	}
	res, err := a.co.Result(ctx, user, resv)
	if err != nil {
		return resultView{}, err
	}
	if res.Status == order.StatusNone {
		return resultView{Status: "unknown", Reservation: resv}, nil
	}
	return a.view(ctx, res), nil
}

// settledView is the push view of an outcome the consumer has just
// committed. A new order is "created": it cannot be paid before it exists,
// and a stream that opens later reads the database first (resultOf). An
// order cancelled since (order reports it FAILED with ReasonCancelled and
// its OrderNo) is "cancelled", as the API lists it, not "failed".
func settledView(res order.Result) resultView {
	v := resultView{Reservation: res.ReservationID, OrderNo: res.OrderNo, Reason: res.Reason, owner: res.User}
	v.Variant = variantOfResult(res)
	switch res.Status {
	case order.StatusQueued:
		v.Status = "queued"
	case order.StatusFailed:
		v.Status = "failed"
		if res.Reason == status.ReasonCancelled && res.OrderNo != "" {
			v.Status, v.Reason = "cancelled", ""
		}
	case order.StatusSuccess:
		v.Status = "created"
	default:
		v.Status = "unknown"
	}
	return v
}

// view is the read path's view of a result: an order's current status
// (created, paid, refunded, cancelled) is read from the database.
func (a *App) view(ctx context.Context, res order.Result) resultView {
	v := settledView(res)
	if res.Status == order.StatusSuccess {
		if o, err := a.p.orders.Get(ctx, res.OrderNo); err == nil {
			v.Status = strings.ToLower(o.Status)
			if len(o.Lines) == 1 {
				if vr, ok := a.sale.variantOfSale(o.Lines[0].ActivityID); ok {
					v.Variant = vr
				}
			}
		}
	}
	return v
}

func (a *App) handleResult(w http.ResponseWriter, r *http.Request) {
	user, _ := userOf(r)
	v, err := a.resultOf(r.Context(), user, r.PathValue("reservation"))
	if err != nil {
		a.fail(w, r, "result", err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func (a *App) handlePay(w http.ResponseWriter, r *http.Request) {
	user, _ := userOf(r)
	var req struct {
		OrderNo string `json:"order_no"`
	}
	const shape = "body must be {\"order_no\":\"…\"}"
	if err := readJSON(r, &req); err != nil {
		writeBadBody(w, shape, err)
		return
	}
	if req.OrderNo == "" {
		writeErr(w, http.StatusBadRequest, "bad_request", shape)
		return
	}
	o, err := a.p.orders.Get(r.Context(), req.OrderNo)
	switch {
	case errors.Is(err, status.ErrOrderNotFound), err == nil && o.UserID != user:
		writeErr(w, http.StatusNotFound, "not_found", "no such order")
		return
	case err != nil:
		a.fail(w, r, "pay", err)
		return
	}
	// The "direct" provider: one payment per order (its reference), so a
	// repeat is the same payment and a payment by another provider is a
	// conflict (fakepay.go).
	err = a.p.canceller.PayRef(r.Context(), req.OrderNo, status.Payment{Provider: directProvider, Reference: "direct-" + req.OrderNo})
	switch {
	case err == nil:
		a.answerPaid(w, r, req.OrderNo)
	case errors.Is(err, status.ErrPaymentConflict):
		writeErr(w, http.StatusConflict, "conflict", "the order was paid already; this payment will be refunded")
	case errors.Is(err, status.ErrOrderCancelled):
		writeErr(w, http.StatusConflict, "cancelled", "the order was cancelled; your payment will be refunded")
	default:
		a.fail(w, r, "pay", err)
	}
}

// variantOfResult is the size a result is for ("" for a sale without):
// its one line's activity "<sale>/<size>" when the result has its lines,
// else the size checkout folds into a variant attempt's reservation ID
// ("<attempt>/<size>", checkout.Attempt.Variant).
func variantOfResult(res order.Result) string {
	if len(res.Lines) == 1 {
		if _, v, ok := strings.Cut(res.Lines[0].ActivityID, "/"); ok {
			return v
		}
	}
	if _, v, ok := strings.Cut(res.Activity, "/"); ok {
		return v
	}
	if i := strings.LastIndexByte(res.ReservationID, '/'); i >= 0 {
		return res.ReservationID[i+1:]
	}
	return ""
}
