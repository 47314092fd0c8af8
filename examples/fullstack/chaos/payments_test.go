package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/seckillkit/seckill/examples/fullstack/crash"
	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/order/payment"
	"github.com/seckillkit/seckill/order/status"
)

// The payment scenario (#28): after the sale, the provider's callbacks to
// the shop (POST /api/payments/callback of the apis, signed with the
// services' -pay-secret-file) are duplicated across both apis and
// reordered (a refund before its payment), an api is killed -9 while the
// callbacks of charged orders reach it (the provider retries on the
// other), and refunds race the orders' expiry (the session's
// payment.expired callback, the canceller at -pay-timeout). The settled
// stores are then counted by the common check (crash: a live order is
// CREATED, PAID or REFUNDED not to the sale) and the scenario's own:
// every callback answered as its order's final state allows.

func paymentScenario() scenario {
	return scenario{id: "P1", what: "payment callbacks duplicated and reordered across both apis, kill -9 of an api between the charge and its callback, refunds racing the expiry", fault: fault{
		sys:      func(sc *sysConfig) { sc.payTimeout = 60 * time.Second },
		payments: payFaults,
	}}
}

// payer sends signed callbacks to the apis.
type payer struct {
	r      *run
	secret []byte
	mu     sync.Mutex
	seen   map[string][]string // order → "kind code outcome" of each answer
}

func (p *payer) send(api int, e payment.Event) (int, string) {
	body, _ := json.Marshal(e)
	ctx, cancel := context.WithTimeout(p.r.ctx, 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, p.r.sys.apis[api%len(p.r.sys.apis)].URL+"/api/payments/callback", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Seckill-Signature", payment.Sign(p.secret, time.Now(), body))
	code, outcome := 0, "no answer"
	if resp, err := p.r.hc.Do(req); err == nil {
		var out struct{ Outcome string }
		_ = json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		code, outcome = resp.StatusCode, out.Outcome
	}
	k := strings.TrimPrefix(e.Type, "payment.") + " " + strconv.Itoa(code) + " " + outcome
	p.mu.Lock()
	p.seen[e.OrderNo] = append(p.seen[e.OrderNo], k)
	p.mu.Unlock()
	p.r.count("callback "+k, 1)
	return code, outcome
}

// until retries e on the apis (from api) until it is answered 200, or the
// deadline: the provider's retries. It returns the last answer.
func (p *payer) until(api int, e payment.Event, deadline time.Time) (int, string) {
	for i := 0; ; i++ {
		code, out := p.send(api+i, e)
		if code == http.StatusOK || time.Now().After(deadline) {
			return code, out
		}
		if !sleepCtx(p.r.ctx, 250*time.Millisecond) {
			return code, out
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

func paidEvent(no, id string) payment.Event {
	return payment.Event{ID: id, Type: payment.EventPaid, OrderNo: no, Reference: "fp-" + no}
}

func refundEvent(no, id string, restock status.Restock) payment.Event {
	return payment.Event{ID: id, Type: payment.EventRefunded, OrderNo: no, Restock: restock}
}

func payFaults(r *run, st crash.State) {
	b, err := os.ReadFile(r.sys.secretFile)
	if err != nil {
		r.violation("payments: read the pay secret: %v", err)
		return
	}
	p := &payer{r: r, secret: []byte(strings.TrimRight(string(b), "\r\n")), seen: map[string][]string{}}
	// The orders r.pay left CREATED (it paid every third buyer's), with
	// 30 s of their payment window left (-pay-timeout 60s).
	var open []order.Order
	for _, o := range st.Orders {
		if uid, _ := strconv.ParseInt(o.UserID, 10, 64); o.Status == order.OrderCreated && uid%3 != 0 && time.Until(o.ExpireTime) > 30*time.Second {
			open = append(open, o)
		}
	}
	slices.SortFunc(open, func(a, b order.Order) int { return strings.Compare(a.OrderNo, b.OrderNo) })
	n := len(open) / 3
	dup, crashed, race := open[:n], open[n:min(2*n, n+3)], open[min(2*n, n+3):]
	r.note("payments: %d open orders: %d duplicated/reordered, %d charged across a crash, %d refunds racing expiry", len(open), len(dup), len(crashed), len(race))
	// One phase after the other: the apis both up for the duplicates and
	// the races, api1 killed only under the charged orders' callbacks.
	var wg sync.WaitGroup

	// Reordered and duplicated: the refund first (409 not_paid), the
	// payment three times on each api at once, the refund retried, a late
	// duplicate of the payment.
	deadline := time.Now().Add(15 * time.Second)
	for i, o := range dup {
		restock := []status.Restock{status.RestockSale, status.RestockNone}[i%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			refund := refundEvent(o.OrderNo, "r-"+o.OrderNo, restock)
			p.send(1, refund)
			var inner sync.WaitGroup
			for k := range 6 {
				inner.Add(1)
				go func() { defer inner.Done(); p.send(k, paidEvent(o.OrderNo, "p-"+o.OrderNo)) }()
			}
			inner.Wait()
			p.until(0, paidEvent(o.OrderNo, "p-"+o.OrderNo), deadline)
			p.until(1, refund, deadline)
			p.send(0, paidEvent(o.OrderNo, "p-"+o.OrderNo))
		}()
	}
	wg.Wait()

	// A crash between the charge and the callback: the charged orders'
	// callbacks go to api1 as it is killed; the provider retries on both
	// apis until an answer 200, for at most 40 s (a claim the dead api
	// left stays in_progress for its 30 s lease, then the retry applies).
	if len(crashed) > 0 {
		for _, o := range crashed {
			wg.Add(1)
			go func() { defer wg.Done(); p.send(0, paidEvent(o.OrderNo, "c-"+o.OrderNo)) }()
		}
		if err := killAPI(0)(r); err != nil {
			r.violation("payments: kill api1: %v", err)
		}
		wg.Wait()
		if err := restartAPI(0)(r); err != nil {
			r.violation("payments: restart api1: %v", err)
		}
		deadline = time.Now().Add(40 * time.Second)
		for _, o := range crashed {
			wg.Add(1)
			go func() {
				defer wg.Done()
				code, out := p.until(1, paidEvent(o.OrderNo, "c-"+o.OrderNo), deadline)
				r.count("crashed charge "+strconv.Itoa(code)+" "+out, 1)
			}()
		}
		wg.Wait()
	}

	// Refunds racing the expiry: half are paid first, then refunded (to the
	// sale) while the session's expiry callback arrives on the other api;
	// the other half are refunded and expired unpaid.
	deadline = time.Now().Add(15 * time.Second)
	for i, o := range race {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i%2 == 0 {
				p.until(1, paidEvent(o.OrderNo, "p-"+o.OrderNo), deadline)
			}
			var inner sync.WaitGroup
			for k, e := range []payment.Event{refundEvent(o.OrderNo, "x-"+o.OrderNo, status.RestockSale),
				{ID: "e-" + o.OrderNo, Type: payment.EventExpired, OrderNo: o.OrderNo}} {
				inner.Add(1)
				go func() { defer inner.Done(); p.until(1+k, e, deadline) }()
			}
			inner.Wait()
		}()
	}
	wg.Wait()
	after, err := r.sys.store.Read(r.ctx)
	if err != nil {
		r.violation("payments: read: %v", err)
		return
	}
	byNo := map[string]order.Order{}
	for _, o := range after.Orders {
		byNo[o.OrderNo] = o
	}
	for i, o := range dup {
		got, want := byNo[o.OrderNo], []string{string(status.RestockSale), string(status.RestockNone)}[i%2]
		if got.Status != order.OrderRefunded || got.Restock != want {
			r.violation("payments: order %s paid and refunded (restock %s) by duplicated, reordered callbacks is %s/%s; answers %v",
				o.OrderNo, want, got.Status, got.Restock, p.seen[o.OrderNo])
		}
	}
	for _, o := range crashed {
		if got := byNo[o.OrderNo]; got.Status != order.OrderPaid && got.Status != order.OrderCancelled {
			r.violation("payments: order %s charged across the crash is %s; answers %v", o.OrderNo, got.Status, p.seen[o.OrderNo])
		}
	}
	for i, o := range race {
		got := byNo[o.OrderNo]
		ok := got.Status == order.OrderCancelled || (i%2 == 0 && got.Status == order.OrderRefunded && got.Restock == string(status.RestockSale))
		if !ok {
			r.violation("payments: order %s, refund racing its expiry, is %s/%s; answers %v", o.OrderNo, got.Status, got.Restock, p.seen[o.OrderNo])
		}
	}
	for no, answers := range p.seen {
		for _, a := range answers {
			if strings.Contains(a, " 401 ") || strings.Contains(a, " 400 ") || strings.Contains(a, " 500 ") {
				r.violation("payments: order %s: a signed callback answered %s", no, a)
			}
		}
	}
	refunded := 0
	for _, o := range after.Orders {
		if o.Status == order.OrderRefunded {
			refunded++
		}
	}
	r.count("refunded", refunded)
	r.note("payments: %d orders refunded; callbacks answered %v", refunded, countAnswers(p.seen))
}

func countAnswers(seen map[string][]string) string {
	c := map[string]int{}
	for _, as := range seen {
		for _, a := range as {
			c[a]++
		}
	}
	return crash.FormatCounts(c)
}
