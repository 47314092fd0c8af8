package app_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/seckillkit/seckill/examples/fullstack/app"
	"github.com/seckillkit/seckill/order"
)

// TestCancelledOrderReadsCancelled (item 7): an order left unpaid past its
// expiry is cancelled by the canceller, and GET /api/result says
// "cancelled" (with its order number), as the README lists it. Before, it
// read {"status":"failed","reason":"cancelled"}.
//
// The pay timeout is a millisecond, so the order is due a millisecond after
// the consumer stamped it; the payment that comes after that is what the
// canceller refuses (Canceller.Pay cancels an expired order itself, if its
// loop has not already): no waiting on the canceller's poll. The test pays
// only once the wall clock — the one the canceller reads — is past the
// order's expire_time as the database holds it: the stream can announce the
// order within that millisecond (the project's CI did, under load), and a
// payment inside the window is rightly accepted.
func TestCancelledOrderReadsCancelled(t *testing.T) {
	cfg := embeddedConfig(10, 2)
	cfg.PayTimeout = time.Millisecond
	a, base := startApp(t, cfg)
	u := login(t, base, "user1")
	resv := app.ClientReservationID("1", "i7")
	s := openSSE(t, base, resv, u.ticket(resv))
	if !first(s) {
		t.Fatal("the stream sent nothing")
	}
	cid, ans, tok, path := u.creds()
	if code, m := u.do("POST", path, map[string]string{"token": tok, "captcha_id": cid, "captcha": ans, "request_id": "i7"}); code != http.StatusAccepted {
		t.Fatalf("buy: %d %v", code, m)
	}
	ev := s.untilFinal() // the order exists (created, or already cancelled)
	orderNo, _ := ev["order_no"].(string)
	if orderNo == "" {
		t.Fatalf("final view without an order: %v", ev)
	}
	var rows []order.Order
	if err := a.Infra().DB.Where("order_no = ?", orderNo).Find(&rows).Error; err != nil || len(rows) != 1 {
		t.Fatalf("the order %s in the DB: %v %v", orderNo, rows, err)
	}
	// At most PayTimeout (1 ms) ahead: the precondition itself, not a
	// stand-in for synchronisation.
	time.Sleep(time.Until(rows[0].ExpireTime) + time.Microsecond)
	if code, m := u.do("POST", "/api/pay", map[string]string{"order_no": orderNo}); code != http.StatusConflict || m["status"] != "cancelled" {
		t.Fatalf("paying the expired order: %d %v, want 409 cancelled", code, m)
	}
	code, m := u.do("GET", "/api/result/"+resv, nil)
	if code != http.StatusOK || m["status"] != "cancelled" || m["order_no"] != orderNo {
		t.Errorf("result of the cancelled order: %d %v, want cancelled with order_no %s", code, m, orderNo)
	}
	if r, _ := m["reason"].(string); r != "" && !strings.Contains(r, "cancel") {
		t.Errorf("result of the cancelled order carries the reason %q", r)
	}
	// A stream opened now says the same, and ends: cancelled is final.
	if ev := openSSE(t, base, resv, u.ticket(resv)).untilFinal(); ev["status"] != "cancelled" {
		t.Errorf("stream of the cancelled order: %v", ev)
	}
}
