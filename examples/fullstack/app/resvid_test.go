package app_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/seckillkit/seckill/examples/fullstack/app"
	"github.com/seckillkit/seckill/stock"
)

// uuidBuyer is a buyer whose user ID is a UUID (36 bytes), as an identity
// provider (Config.SignIn) returns it.
const uuidBuyer = "7c9e6679-7425-40de-944b-e07fc1f90ae7"

// startUUIDApp starts the embedded service and signs uuidBuyer in.
func startUUIDApp(t *testing.T, stockUnits int64) (*app.App, *apiClient) {
	t.Helper()
	a, base := startApp(t, embeddedConfig(10, stockUnits))
	tok, err := app.SessionFor(context.Background(), a, uuidBuyer)
	if err != nil {
		t.Fatal(err)
	}
	return a, &apiClient{t: t, base: base, bearer: tok}
}

// uuidCreds is creds for uuidBuyer: the answer is read from the app (the
// demo hook serves demo users only).
func uuidCreds(t *testing.T, a *app.App, c *apiClient) (captchaID, answer, tok, path string) {
	t.Helper()
	_, m := c.do("GET", "/api/captcha", nil)
	captchaID = c.str(m, "id")
	answer, _ = app.CaptchaAnswer(context.Background(), a, captchaID, uuidBuyer)
	_, m = c.do("POST", "/api/activity/token", struct{}{})
	tok = c.str(m, "token")
	_, m = c.do("GET", "/api/activity/path", nil)
	path = c.str(m, "path")
	if captchaID == "" || answer == "" || tok == "" || path == "" {
		t.Fatalf("credentials incomplete: %q %q %q %q", captchaID, answer, tok, path)
	}
	return
}

// countUserOrders reads uuidBuyer's orders with SQL.
func countUserOrders(t *testing.T, a *app.App) int64 {
	t.Helper()
	var n int64
	if err := app.DB(a).Raw("SELECT COUNT(*) FROM seckill_order WHERE user_id = ?", uuidBuyer).Scan(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

// TestBuyUUIDUserWithPageAttemptID: a buyer whose user ID is a UUID buys
// with the page's 24-hex attempt ID — a 65-byte reservation ID — and gets
// an order. Before, order refused reservation IDs over 64 bytes: every
// attempt reserved, failed the hand-off, released and answered 503, and the
// retry answered failed/released.
func TestBuyUUIDUserWithPageAttemptID(t *testing.T) {
	t.Parallel()
	a, u := startUUIDApp(t, 5)
	cid, ans, tok, path := uuidCreds(t, a, u)
	attempt := fmt.Sprintf("%024x", 0xa77e39)
	resv := app.ClientReservationID(uuidBuyer, attempt)
	if len(resv) != 65 {
		t.Fatalf("reservation ID of %d bytes, want 65", len(resv))
	}
	code, m := u.do("POST", path, map[string]string{"token": tok, "captcha_id": cid, "captcha": ans, "request_id": attempt})
	if code != http.StatusAccepted || u.str(m, "status") != "queued" || u.str(m, "reservation") != resv {
		t.Fatalf("buy: %d %v, want 202 queued %s", code, m, resv)
	}
	waitUserOrders(t, a, 1)
	var got string
	if err := app.DB(a).Raw("SELECT reservation_id FROM seckill_order WHERE user_id = ?", uuidBuyer).Scan(&got).Error; err != nil {
		t.Fatal(err)
	}
	if got != resv {
		t.Errorf("order's reservation_id %q, want %q", got, resv)
	}
	if held, err := app.Held(context.Background(), a, uuidBuyer); err != nil || held != 1 {
		t.Errorf("held %d (%v), want 1", held, err)
	}
}

// TestBuyRefusesRequestIDBeyondTheRule: a request ID whose reservation ID
// would break the library's reservation-ID rule is refused 400, naming the
// limit, before anything is reserved (the ledger stays empty).
func TestBuyRefusesRequestIDBeyondTheRule(t *testing.T) {
	t.Parallel()
	a, u := startUUIDApp(t, 5)
	for _, rid := range []string{strings.Repeat("f", 41), strings.Repeat("f", stock.MaxReservationIDLen)} {
		cid, ans, tok, path := uuidCreds(t, a, u)
		code, m := u.do("POST", path, map[string]string{"token": tok, "captcha_id": cid, "captcha": ans, "request_id": rid})
		if code != http.StatusBadRequest || u.str(m, "status") != "bad_request" ||
			!strings.Contains(u.str(m, "message"), fmt.Sprint(stock.MaxReservationIDLen)) {
			t.Errorf("request_id of %d bytes: %d %v, want 400 bad_request naming %d", len(rid), code, m, stock.MaxReservationIDLen)
		}
	}
	n, err := app.LedgerEntries(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("ledger holds %d entries, want 0: something was reserved", n)
	}
	if c := countUserOrders(t, a); c != 0 {
		t.Errorf("%d orders, want 0", c)
	}
}

// waitUserOrders waits until uuidBuyer has want orders (waitOrders for a
// string user ID), and fails after a generous bound.
func waitUserOrders(t *testing.T, a *app.App, want int64) {
	t.Helper()
	deadline := time.Now().Add(drainBound)
	for {
		n := countUserOrders(t, a)
		if n == want {
			return
		}
		if n > want || time.Now().After(deadline) {
			t.Fatalf("%d orders of %s, want %d", n, uuidBuyer, want)
		}
		time.Sleep(20 * time.Millisecond) // polling the DB for a state, bounded by drainBound
	}
}
