package app

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/order/payment"
	"github.com/seckillkit/seckill/order/status"
)

// Payments: the order is paid and refunded through the provider-callback
// adapter (order/payment.Handler, mounted at POST /api/payments/callback)
// and a fake provider standing in for a real one.
//
//	page "pay" ─► POST /api/pay/fake ─► fakepay charges (reference fp-<order>)
//	                                     └─► signed payment.paid callback ─► Handler ─► Canceller.PayRef
//	admin refund / seckillctl refund ─► fakepay refunds
//	                                     └─► signed payment.refunded callback ─► Handler ─► Canceller.Refund
//
// The fake provider signs with the deployment's payment secret (-pay-secret-
// file, SECKILL_PAY_SECRET; random per process) and posts its callback to
// the mounted Handler in process (the provider runs beside the shop here).
// Its event IDs are one per order and kind (pay-<order>, refund-<order>),
// as a provider retries one event: a repeated charge or refund is a replay
// the Handler answers "duplicate", and the database answers it the same
// anyway. POST /api/pay is the "direct" provider: PayRef with the reference
// direct-<order>, so a second click is the same payment, and a payment by
// the other provider is a conflict (refund it), never a second sale.

const (
	fakeProvider   = "fakepay" // the fake provider's name: the Provider of its payments
	directProvider = "direct"  // POST /api/pay's payments
	paySignHeader  = "Seckill-Signature"
)

// payments is the node's payment side: the callback handler and the
// fake provider's signing secret.
type payments struct {
	secret []byte
	h      *payment.Handler
}

// secretFile registers a flag naming a file that holds a secret, and reads
// the secret from env when set (never a flag value: argv is visible).
func secretFile(dst *string, fs *flag.FlagSet, name, env, usage string) {
	if v := os.Getenv(env); v != "" {
		*dst = v
	}
	fs.Func(name, usage, func(path string) error {
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		*dst = strings.TrimRight(string(b), "\r\n")
		return nil
	})
}

// buildPayments builds the callback handler over the canceller.
func (a *App) buildPayments() error {
	secret := []byte(a.cfg.PaySecret)
	if len(secret) == 0 {
		secret = make([]byte, 32)
		_, _ = rand.Read(secret)
	}
	h, err := payment.NewHandler(fakeProvider, a.p.canceller, a.in.Redis, payment.HMACSHA256(secret),
		payment.WithKeyPrefix(a.cfg.KeyPrefix))
	if err != nil {
		return err
	}
	a.p.pay = &payments{secret: secret, h: h}
	return nil
}

// payCancellerOptions are the canceller's payment hooks: a second payment
// of a paid order is logged for refund (the fake provider keeps no money),
// and a refund restocked to the shop hands the units to the shop's own
// inventory, which this deployment does not keep: logged.
func (a *App) payCancellerOptions() []status.CancellerOption {
	log := a.log
	return []status.CancellerOption{
		status.WithOnPayConflict(func(ctx context.Context, o order.Order, p status.Payment) {
			a.m.refused.WithLabelValues("pay_conflict").Inc()
			log.Warn("a second payment of a paid order: refund it", "order_no", o.OrderNo, "provider", p.Provider, "reference", p.Reference)
		}),
		status.WithRefundHook(func(ctx context.Context, tx *gorm.DB, orders []order.Order) error {
			for _, o := range orders {
				log.Info("refund: units returned to the shop's inventory", "order_no", o.OrderNo, "qty", o.Qty)
			}
			return nil
		}),
	}
}

// PayEvent is a provider callback's body as the fake provider sends it
// (payment.Event's JSON).
type PayEvent = payment.Event

// SignPayEvent returns e's body and its signature header value under the
// node's payment secret, signed at at: what the fake provider sends (the
// fault tests replay, reorder and forge with it).
func (a *App) SignPayEvent(e PayEvent, at time.Time) (body []byte, signature string) {
	body, _ = json.Marshal(e)
	return body, payment.Sign(a.p.pay.secret, at, body)
}

// sendCallback posts a signed callback of e to the mounted handler and
// returns its HTTP code and outcome.
func (a *App) sendCallback(ctx context.Context, e PayEvent) (int, string) {
	body, sig := a.SignPayEvent(e, time.Now())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "/api/payments/callback", bytes.NewReader(body))
	if err != nil {
		return http.StatusInternalServerError, "error"
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(paySignHeader, sig)
	rec := &answerRecorder{h: http.Header{}}
	a.p.pay.h.ServeHTTP(rec, req)
	var out struct {
		Outcome string `json:"outcome"`
	}
	_ = json.Unmarshal(rec.body.Bytes(), &out)
	return rec.code, out.Outcome
}

// answerRecorder is the in-process response of a callback.
type answerRecorder struct {
	h    http.Header
	code int
	body bytes.Buffer
}

func (r *answerRecorder) Header() http.Header { return r.h }
func (r *answerRecorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
}
func (r *answerRecorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	return r.body.Write(b)
}

// fakeCharge is the fake provider's charge of orderNo: it "charges" (the
// reference is the order's, so a retried charge is the same payment) and
// calls back payment.paid.
func (a *App) fakeCharge(ctx context.Context, orderNo string) (int, string) {
	return a.sendCallback(ctx, PayEvent{ID: "pay-" + orderNo, Type: payment.EventPaid, OrderNo: orderNo, Reference: "fp-" + orderNo})
}

// Refund refunds orderNo through the fake provider, which calls back
// payment.refunded with the restock choice: nil when this call refunded
// it; status.ErrAlreadyRefunded, ErrNotPaid, ErrAlreadyCancelled,
// ErrOrderNotFound as the canceller answers; order.ErrInvalidArgument for
// a bad restock; another error when the callback failed (retry).
func (a *App) Refund(ctx context.Context, orderNo string, restock status.Restock) error {
	switch restock {
	case status.RestockSale, status.RestockShop, status.RestockNone:
	default:
		return fmt.Errorf("%w: restock %q: want sale, shop or none", order.ErrInvalidArgument, restock)
	}
	code, outcome := a.sendCallback(ctx, PayEvent{ID: "refund-" + orderNo, Type: payment.EventRefunded, OrderNo: orderNo, Restock: restock})
	switch outcome {
	case "refunded":
		return nil
	case "already_refunded":
		return status.ErrAlreadyRefunded
	case "duplicate": // the provider refunded it before: the order says how it ended
		o, err := a.p.orders.Get(ctx, orderNo)
		if err != nil {
			return err
		}
		if o.Status == order.OrderRefunded {
			return status.ErrAlreadyRefunded
		}
		return fmt.Errorf("refund %s: the provider's refund was recorded, the order is %s", orderNo, o.Status)
	case "not_paid":
		return status.ErrNotPaid
	case "already_cancelled":
		return status.ErrAlreadyCancelled
	case "not_found":
		return status.ErrOrderNotFound
	case "bad_event":
		return fmt.Errorf("%w: order %s", order.ErrInvalidArgument, orderNo)
	}
	return fmt.Errorf("refund %s: the provider's callback answered %d %s", orderNo, code, outcome)
}

// handleFakePay is the page's "pay": the buyer's own order is charged by
// the fake provider, whose callback pays it; the answer is the order's
// state after the callback, read from the database (paid, cancelled,
// refunded), so the buyer is told what the store holds.
func (a *App) handleFakePay(w http.ResponseWriter, r *http.Request) {
	user, _ := userOf(r)
	var req struct {
		OrderNo string `json:"order_no"`
	}
	const shape = "body must be {\"order_no\":\"…\"}"
	if err := readJSON(r, &req); err != nil {
		writeBadBody(w, shape, err)
		return
	}
	if req.OrderNo == "" || len(req.OrderNo) > 32 {
		writeErr(w, http.StatusBadRequest, "bad_request", shape)
		return
	}
	ctx := r.Context()
	o, err := a.p.orders.Get(ctx, req.OrderNo)
	switch {
	case errors.Is(err, status.ErrOrderNotFound), err == nil && o.UserID != user:
		writeErr(w, http.StatusNotFound, "not_found", "no such order")
		return
	case err != nil:
		a.fail(w, r, "pay", err)
		return
	}
	code, outcome := a.fakeCharge(ctx, req.OrderNo)
	if code != http.StatusOK {
		a.fail(w, r, "pay", fmt.Errorf("payment callback: %d %s", code, outcome))
		return
	}
	if outcome == "conflict" {
		writeErr(w, http.StatusConflict, "conflict", "the order was paid already; this payment will be refunded")
		return
	}
	a.answerPaid(w, r, req.OrderNo)
}

// answerPaid answers a payment that went through with the order's state
// read from the database: paid, refunded (a repeat of the payment of an
// order refunded since) or cancelled (a late payment: refund it).
func (a *App) answerPaid(w http.ResponseWriter, r *http.Request, orderNo string) {
	o, err := a.p.orders.Get(r.Context(), orderNo)
	if err != nil {
		a.fail(w, r, "pay", err)
		return
	}
	switch o.Status {
	case order.OrderPaid, order.OrderRefunded:
		writeJSON(w, http.StatusOK, map[string]string{"status": strings.ToLower(o.Status), "order_no": orderNo})
	case order.OrderCancelled:
		writeErr(w, http.StatusConflict, "cancelled", "the order was cancelled; your payment will be refunded")
	default:
		a.fail(w, r, "pay", fmt.Errorf("order %s is %s after its payment", orderNo, o.Status))
	}
}
