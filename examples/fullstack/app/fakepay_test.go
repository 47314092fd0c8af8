package app_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seckillkit/seckill/admin"
	"github.com/seckillkit/seckill/examples/fullstack/app"
	"github.com/seckillkit/seckill/order/payment"
	"github.com/seckillkit/seckill/order/status"
)

// buyOrder buys one unit as u (request ID req) and returns the reservation
// and its order number, once the order exists.
func buyOrder(t *testing.T, base string, u *apiClient, user, req string) (resv, orderNo string) {
	t.Helper()
	resv = app.ClientReservationID(user, req)
	s := openSSE(t, base, resv, u.ticket(resv))
	if !first(s) {
		t.Fatal("the stream sent nothing")
	}
	cid, ans, tok, path := u.creds()
	if code, m := u.do("POST", path, map[string]string{"token": tok, "captcha_id": cid, "captcha": ans, "request_id": req}); code != http.StatusAccepted {
		t.Fatalf("buy: %d %v", code, m)
	}
	ev := s.untilFinal()
	orderNo, _ = ev["order_no"].(string)
	if ev["status"] != "created" || orderNo == "" {
		t.Fatalf("final view %v, want created with an order", ev)
	}
	return resv, orderNo
}

// conserved counts the invariants: the Redis and DB sides of the stock
// conservation, and returns the live orders' units.
func conserved(t *testing.T, a *app.App) app.Invariants {
	t.Helper()
	iv, err := a.Invariants(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if iv.RedisRemain+iv.InFlight+iv.LiveOrders != iv.Initial+iv.Adjusted || iv.DBStock+iv.LiveOrders != iv.Total {
		t.Fatalf("stock not conserved: %+v", iv)
	}
	return iv
}

// TestPayAndRefundThroughTheCallback: the page's pay goes through the fake
// provider and the signed callback (a repeat is the same payment), a
// second payment by another provider is a conflict, the admin's refund
// goes through the callback too — to the sale (the unit back on sale,
// counted) or not (the unit stays sold) — and the buyer reads "refunded".
func TestPayAndRefundThroughTheCallback(t *testing.T) {
	a, base := startApp(t, embeddedConfig(3, 3))
	ctx := context.Background()
	u1, u2 := login(t, base, "user1"), login(t, base, "user2")
	resv1, o1 := buyOrder(t, base, u1, "1", "p1")
	_, o2 := buyOrder(t, base, u2, "2", "p2")

	if code, m := u2.do("POST", "/api/pay/fake", map[string]string{"order_no": o1}); code != http.StatusNotFound {
		t.Fatalf("paying another buyer's order: %d %v, want 404", code, m)
	}
	for range 2 { // the second charge is the same payment: a replayed callback
		if code, m := u1.do("POST", "/api/pay/fake", map[string]string{"order_no": o1}); code != http.StatusOK || m["status"] != "paid" {
			t.Fatalf("pay through the fake provider: %d %v", code, m)
		}
	}
	var rows []struct{ Provider, Reference, Outcome string }
	if err := app.DB(a).Table("seckill_payment").Where("order_no = ?", o1).Find(&rows).Error; err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].Provider != "fakepay" || rows[0].Reference != "fp-"+o1 || rows[0].Outcome != "PAID" {
		t.Fatalf("payments of %s: %+v, want one fakepay PAID", o1, rows)
	}
	if code, m := u1.do("POST", "/api/pay", map[string]string{"order_no": o1}); code != http.StatusConflict || m["status"] != "conflict" {
		t.Fatalf("a second payment by another provider: %d %v, want 409 conflict", code, m)
	}
	if code, m := u1.do("GET", "/api/result/"+resv1, nil); code != 200 || m["status"] != "paid" {
		t.Fatalf("result of the paid order: %d %v", code, m)
	}
	iv := conserved(t, a)
	if iv.LiveOrders != 2 {
		t.Fatalf("live orders %d, want 2", iv.LiveOrders)
	}
	remain := iv.RedisRemain

	if err := a.Refund(ctx, o2, status.RestockSale); !errors.Is(err, status.ErrNotPaid) {
		t.Fatalf("refund of an unpaid order: %v, want ErrNotPaid", err)
	}
	if err := a.Refund(ctx, o1, "back"); err == nil {
		t.Fatal("an unknown restock is accepted")
	}
	if err := a.Refund(ctx, o1, status.RestockSale); err != nil {
		t.Fatalf("refund to the sale: %v", err)
	}
	for _, r := range []status.Restock{status.RestockSale, status.RestockNone} { // the refund's event again: once
		if err := a.Refund(ctx, o1, r); !errors.Is(err, status.ErrAlreadyRefunded) {
			t.Fatalf("second refund (%s): %v, want ErrAlreadyRefunded", r, err)
		}
	}
	if code, m := u1.do("GET", "/api/result/"+resv1, nil); code != 200 || m["status"] != "refunded" {
		t.Fatalf("result of the refunded order: %d %v, want refunded", code, m)
	}
	if code, m := u1.do("POST", "/api/pay/fake", map[string]string{"order_no": o1}); code != 200 || m["status"] != "refunded" {
		t.Fatalf("the payment again after the refund: %d %v, want 200 refunded", code, m)
	}
	iv = conserved(t, a)
	if iv.LiveOrders != 1 || iv.RedisRemain != remain+1 || iv.Orders["REFUNDED"] != 1 {
		t.Fatalf("after a refund to the sale: %+v; want 1 live order and %d remaining", iv, remain+1)
	}

	if code, m := u2.do("POST", "/api/pay", map[string]string{"order_no": o2}); code != 200 || m["status"] != "paid" {
		t.Fatalf("pay directly: %d %v", code, m)
	}
	b := app.AdminBackend(t, a)
	if _, err := b.Refund(ctx, admin.RefundParams{Activity: "other", OrderNo: o2, Restock: "none"}); !errors.Is(err, admin.ErrNotFound) {
		t.Fatalf("admin refund of an order of another activity: %v, want ErrNotFound", err)
	}
	ch, err := b.Refund(ctx, admin.RefundParams{Activity: app.ActivityID(a), OrderNo: o2, Restock: "none"})
	if err != nil || ch.Before.Status != "PAID" || ch.After.Status != "REFUNDED" || ch.After.Restock != "none" {
		t.Fatalf("admin refund without restock: %+v %v", ch, err)
	}
	if _, err := b.Refund(ctx, admin.RefundParams{Activity: app.ActivityID(a), OrderNo: o2, Restock: "sale"}); !errors.Is(err, admin.ErrConflict) {
		t.Fatalf("admin refund again: %v, want ErrConflict", err)
	}
	iv = conserved(t, a)
	if iv.LiveOrders != 1 || iv.RedisRemain != remain+1 || iv.Orders["REFUNDED"] != 2 {
		t.Fatalf("after a refund without restock: %+v; the unit stays sold", iv)
	}
}

// TestPayCallbackRefusesForgedAndStale: the mounted callback refuses a
// forged signature, a stale timestamp and a bad body, and changes nothing.
func TestPayCallbackRefusesForgedAndStale(t *testing.T) {
	a, base := startApp(t, embeddedConfig(2, 2))
	u := login(t, base, "user1")
	resv, o := buyOrder(t, base, u, "1", "f1")
	post := func(body []byte, sig string) int {
		req, _ := http.NewRequest("POST", base+"/api/payments/callback", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Seckill-Signature", sig)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	e := app.PayEvent{ID: "evt-forged", Type: payment.EventPaid, OrderNo: o, Reference: "fp-x"}
	body, _ := a.SignPayEvent(e, time.Now())
	if code := post(body, payment.Sign([]byte(strings.Repeat("w", 32)), time.Now(), body)); code != http.StatusUnauthorized {
		t.Errorf("forged: %d, want 401", code)
	}
	if body, sig := a.SignPayEvent(e, time.Now().Add(-time.Hour)); post(body, sig) != http.StatusUnauthorized {
		t.Error("stale: accepted")
	}
	if code := post(body, ""); code != http.StatusUnauthorized {
		t.Errorf("unsigned: %d, want 401", code)
	}
	if code, m := u.do("GET", "/api/result/"+resv, nil); code != 200 || m["status"] != "created" {
		t.Fatalf("after refused callbacks: %d %v, want created", code, m)
	}
	if body, sig := a.SignPayEvent(e, time.Now()); post(body, sig) != http.StatusOK {
		t.Fatal("a well-signed callback is refused")
	}
	if code, m := u.do("GET", "/api/result/"+resv, nil); code != 200 || m["status"] != "paid" {
		t.Fatalf("after the signed callback: %d %v, want paid", code, m)
	}
}

// -pay-secret-file and SECKILL_PAY_SECRET set the callback secret; a short
// one is refused.
func TestConfigPaySecret(t *testing.T) {
	cleanEnv(t)
	t.Setenv("SECKILL_PAY_SECRET", "")
	parse := func(args ...string) (app.Config, error) {
		c := app.DefaultConfig()
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		c.RegisterFlags(fs)
		if err := fs.Parse(args); err != nil {
			return c, err
		}
		return c, c.Validate()
	}
	if c, err := parse(); err != nil || c.PaySecret != "" {
		t.Fatalf("default: %q %v, want empty (random per process)", c.PaySecret, err)
	}
	f := filepath.Join(t.TempDir(), "pay")
	if err := os.WriteFile(f, []byte(strings.Repeat("p", 32)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if c, err := parse("-pay-secret-file", f); err != nil || c.PaySecret != strings.Repeat("p", 32) {
		t.Errorf("-pay-secret-file: %q %v", c.PaySecret, err)
	}
	t.Setenv("SECKILL_PAY_SECRET", "short")
	if _, err := parse(); err == nil || !strings.Contains(err.Error(), "payment secret") {
		t.Errorf("a 5-byte payment secret: %v, want refused", err)
	}
}
