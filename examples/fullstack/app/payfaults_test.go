package app_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/seckillkit/seckill/examples/fullstack/app"
	"github.com/seckillkit/seckill/order/payment"
	"github.com/seckillkit/seckill/order/status"
)

// The payment faults of the reference deployment (#28), in process: the
// provider's callbacks duplicated, reordered, cut off by a crash, and a
// refund racing an expiry. Each counts the invariants after it.

// callback posts e, signed now with the node's payment secret, to the
// mounted callback handler and returns the code and outcome.
func callback(t *testing.T, a *app.App, base string, e app.PayEvent) (int, string) {
	t.Helper()
	body, sig := a.SignPayEvent(e, time.Now())
	req, _ := http.NewRequest("POST", base+"/api/payments/callback", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Seckill-Signature", sig)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct{ Outcome string }
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out.Outcome
}

func paid(no, id string) app.PayEvent {
	return app.PayEvent{ID: id, Type: payment.EventPaid, OrderNo: no, Reference: "fp-" + no}
}

func refunded(no, id string, restock string) app.PayEvent {
	return app.PayEvent{ID: id, Type: payment.EventRefunded, OrderNo: no, Restock: statusRestock(restock)}
}

// payments counts the payment rows of an order by outcome.
func payments(t *testing.T, a *app.App, no string) map[string]int {
	t.Helper()
	var rows []struct{ Outcome string }
	if err := app.DB(a).Table("seckill_payment").Where("order_no = ?", no).Find(&rows).Error; err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, r := range rows {
		n[r.Outcome]++
	}
	return n
}

// TestPayFaultDuplicateAndReorderedCallbacks: the same payment called back
// many times at once (one event ID, and re-sent under new IDs) pays once;
// a refund called back before its payment is refused (409 not_paid) and
// applies on the provider's retry after the payment; a late duplicate of
// the payment changes nothing; the unit goes back on sale exactly once.
func TestPayFaultDuplicateAndReorderedCallbacks(t *testing.T) {
	a, base := startApp(t, embeddedConfig(2, 2))
	u := login(t, base, "user1")
	resv, no := buyOrder(t, base, u, "1", "d1")
	before := conserved(t, a)

	// Reordered: the refund first.
	if code, out := callback(t, a, base, refunded(no, "evt-r", "sale")); code != http.StatusConflict || out != "not_paid" {
		t.Fatalf("refund before the payment: %d %s, want 409 not_paid", code, out)
	}
	// Duplicated: 8 deliveries of one event and 8 re-sent under new IDs, at once.
	var wg sync.WaitGroup
	answers := make([]string, 16)
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := "evt-p"
			if i%2 == 1 {
				id = "evt-p-" + string(rune('a'+i))
			}
			code, out := callback(t, a, base, paid(no, id))
			answers[i] = http.StatusText(code) + " " + out
		}()
	}
	wg.Wait()
	for _, ans := range answers {
		switch ans {
		case "OK paid", "OK duplicate", "Conflict in_progress":
		default:
			t.Fatalf("a duplicated payment callback answered %q (all: %v)", ans, answers)
		}
	}
	if n := payments(t, a, no); n["PAID"] != 1 || len(n) != 1 {
		t.Fatalf("payment rows %v, want one PAID", n)
	}
	// The provider retries the refund: now it applies, once.
	if code, out := callback(t, a, base, refunded(no, "evt-r", "sale")); code != 200 || out != "refunded" {
		t.Fatalf("the refund's retry: %d %s, want refunded", code, out)
	}
	if code, out := callback(t, a, base, paid(no, "evt-p-late")); code != 200 || out != "paid" {
		t.Fatalf("a late duplicate of the payment: %d %s, want 200 paid (the same payment, recorded)", code, out)
	}
	if code, out := callback(t, a, base, refunded(no, "evt-r2", "sale")); code != 200 || out != "already_refunded" {
		t.Fatalf("a second refund event: %d %s, want already_refunded", code, out)
	}
	if code, m := u.do("GET", "/api/result/"+resv, nil); code != 200 || m["status"] != "refunded" {
		t.Fatalf("result: %d %v, want refunded", code, m)
	}
	iv := conserved(t, a)
	if iv.RedisRemain != before.RedisRemain+1 || iv.DBStock != before.DBStock+1 || iv.LiveOrders != 0 || iv.RefundedSale != 1 {
		t.Fatalf("after the refund to the sale: %+v (before %+v): the unit back once", iv, before)
	}
}

// TestPayFaultCrashBetweenChargeAndCallback: the provider charged and the
// node died while applying its callback, leaving the replay guard claimed
// — before the order changed, and after it changed but before the guard
// was marked done. The provider's retries are answered 409 in_progress
// until the claim lapses (payment.Handler's claim is a 30 s lease), then
// applied: the order is paid, by one payment, either way.
func TestPayFaultCrashBetweenChargeAndCallback(t *testing.T) {
	a, base := startApp(t, embeddedConfig(3, 3))
	mr := app.Miniredis(a)
	if mr == nil {
		t.Skip("needs the embedded Redis (its clock is moved)")
	}
	prefix := a.Config().KeyPrefix
	for i, crash := range []string{"before the order changed", "after the order changed"} {
		user := []string{"1", "2"}[i]
		u := login(t, base, "user"+user)
		_, no := buyOrder(t, base, u, user, "c"+user)
		id := "evt-crash-" + user
		if i == 1 { // the order changed: a first delivery applied, its "done" lost with the node
			if code, out := callback(t, a, base, paid(no, id)); code != 200 || out != "paid" {
				t.Fatalf("first delivery: %d %s", code, out)
			}
		}
		key := prefix + "payment:event:{fakepay:" + id + "}"
		mr.Set(key, "pending")         // the dead node's claim
		mr.SetTTL(key, 30*time.Second) // the lease the dead node's claim had
		if code, out := callback(t, a, base, paid(no, id)); code != http.StatusConflict || out != "in_progress" {
			t.Fatalf("%s: the retry while the claim stands: %d %s, want 409 in_progress", crash, code, out)
		}
		mr.FastForward(30*time.Second + time.Millisecond)
		if code, out := callback(t, a, base, paid(no, id)); code != 200 || out != "paid" {
			t.Fatalf("%s: the retry after the claim lapsed: %d %s, want paid", crash, code, out)
		}
		if n := payments(t, a, no); n["PAID"] != 1 || len(n) != 1 {
			t.Fatalf("%s: payment rows %v, want one PAID", crash, n)
		}
	}
	if iv := conserved(t, a); iv.Orders["PAID"] != 2 || iv.LiveOrders != 2 {
		t.Fatalf("after the crashes: %+v", iv)
	}
}

// TestPayFaultRefundRacesExpiry: a paid order's refund (to the sale), its
// session's expiry callback and the canceller's cancel, at once, many
// times: the order ends REFUNDED and its unit goes back exactly once; an
// unpaid order's refund racing its expiry: the refund is refused
// (not_paid), the order cancelled, the unit back once.
func TestPayFaultRefundRacesExpiry(t *testing.T) {
	a, base := startApp(t, embeddedConfig(3, 3))
	u1, u2 := login(t, base, "user1"), login(t, base, "user2")
	_, paidNo := buyOrder(t, base, u1, "1", "x1")
	_, openNo := buyOrder(t, base, u2, "2", "x2")
	if code, m := u1.do("POST", "/api/pay/fake", map[string]string{"order_no": paidNo}); code != 200 || m["status"] != "paid" {
		t.Fatalf("pay: %d %v", code, m)
	}
	before := conserved(t, a)
	var wg sync.WaitGroup
	var mu sync.Mutex
	got := map[string]int{}
	for i := range 6 {
		for _, e := range []app.PayEvent{
			refunded(paidNo, "evt-rx-"+string(rune('a'+i)), "sale"),
			{ID: "evt-ex-" + string(rune('a'+i)), Type: payment.EventExpired, OrderNo: paidNo},
			refunded(openNo, "evt-ro-"+string(rune('a'+i)), "sale"),
			{ID: "evt-eo-" + string(rune('a'+i)), Type: payment.EventExpired, OrderNo: openNo},
		} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				code, out := callback(t, a, base, e)
				mu.Lock()
				got[e.Type+" "+e.OrderNo[len(e.OrderNo)-1:]+" "+http.StatusText(code)+" "+out]++
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	iv := conserved(t, a)
	if iv.Orders["REFUNDED"] != 1 || iv.Orders["CANCELLED"] != 1 || iv.LiveOrders != 0 ||
		iv.RedisRemain != before.RedisRemain+2 || iv.DBStock != before.DBStock+2 {
		t.Fatalf("after the races: %+v (before %+v), answers %v; want one refunded, one cancelled, both units back once", iv, before, got)
	}
	t.Logf("answers: %v", got)
}

func statusRestock(s string) status.Restock { return status.Restock(s) }
