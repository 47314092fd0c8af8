package app_test

import (
	"context"
	"testing"
	"time"

	"github.com/seckillkit/seckill/examples/fullstack/app"
	"github.com/seckillkit/seckill/stock"
)

// waitOrders waits until the database holds want orders of user (read with
// SQL, not through the app), and fails after a generous bound.
func waitOrders(t *testing.T, a *app.App, user int64, want int64) {
	t.Helper()
	deadline := time.Now().Add(drainBound)
	for {
		var n int64
		if err := app.DB(a).Raw("SELECT COUNT(*) FROM seckill_order WHERE user_id = ?", user).Scan(&n).Error; err != nil {
			t.Fatal(err)
		}
		if n == want {
			return
		}
		if n > want || time.Now().After(deadline) {
			t.Fatalf("user %d has %d orders, want %d", user, n, want)
		}
		time.Sleep(20 * time.Millisecond) // polling the DB for a state, bounded by drainBound
	}
}

// Outcomes the buyer could not see (a crash between the access token and
// the reservation, a lost Reserve reply, a lost 202) never lock the buyer
// out and never give a second unit. Before, each of these answered
// 409 already_bought to a buyer with no order.
func TestUncertainOutcomesNeitherLockOutNorDuplicate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, base := startApp(t, embeddedConfig(20, 10))

	t.Run("token spent, then the process died before Reserve", func(t *testing.T) {
		u := login(t, base, "user4")
		cid, ans, tok, path := u.creds()
		if err := app.ConsumeToken(ctx, a, "4", tok); err != nil {
			t.Fatal(err)
		}
		code, m := u.do("POST", path, map[string]string{"token": tok, "captcha_id": cid, "captcha": ans})
		if code != 202 || u.str(m, "status") != "queued" {
			t.Fatalf("retry after the lost attempt: %d %v (want 202 queued)", code, m)
		}
		waitOrders(t, a, 4, 1)
		// a second unit is refused: the buyer holds one now
		cid, ans, _, path = u.creds2()
		if code, m = u.do("POST", path, map[string]string{"token": tok, "captcha_id": cid, "captcha": ans, "request_id": "again"}); code != 409 {
			t.Fatalf("second unit: %d %v", code, m)
		}
		waitOrders(t, a, 4, 1)
	})

	t.Run("Reserve ran but its reply was lost; the retry gets that reservation", func(t *testing.T) {
		u := login(t, base, "user5")
		cid, ans, tok, path := u.creds()
		resv := app.ClientReservationID("5", "attempt-1")
		if err := app.ConsumeToken(ctx, a, "5", tok); err != nil {
			t.Fatal(err)
		}
		if res, err := app.ReserveAs(ctx, a, "5", resv); err != nil || res.Status != stock.Reserved {
			t.Fatalf("stage the lost reserve: %v %v", res, err)
		}
		for i := 0; i < 3; i++ { // the client retries, three times
			code, m := u.do("POST", path, map[string]string{"token": tok, "captcha_id": cid, "captcha": ans, "request_id": "attempt-1"})
			if (code != 202 && code != 200) || u.str(m, "reservation") != resv {
				t.Fatalf("retry %d: %d %v (want the lost reservation %s)", i, code, m, resv)
			}
		}
		waitOrders(t, a, 5, 1)
		held, err := app.Held(ctx, a, "5")
		if err != nil || held != 1 {
			t.Fatalf("held %d, %v: want 1", held, err)
		}
		var orders int64
		if err := app.DB(a).Raw("SELECT COUNT(*) FROM seckill_order WHERE reservation_id = ?", resv).Scan(&orders).Error; err != nil || orders != 1 {
			t.Fatalf("orders of %s: %d %v", resv, orders, err)
		}
	})

	t.Run("a released reservation answers failed and gives the token back", func(t *testing.T) {
		u := login(t, base, "user6")
		cid, ans, tok, path := u.creds()
		resv := app.ClientReservationID("6", "attempt-1")
		if err := app.ConsumeToken(ctx, a, "6", tok); err != nil {
			t.Fatal(err)
		}
		if res, err := app.ReserveAs(ctx, a, "6", resv); err != nil || res.Status != stock.Reserved {
			t.Fatalf("stage: %v %v", res, err)
		}
		if err := app.ReleaseFenced(ctx, a, "6", resv); err != nil { // the reconciler, after the grace
			t.Fatal(err)
		}
		code, m := u.do("POST", path, map[string]string{"token": tok, "captcha_id": cid, "captcha": ans, "request_id": "attempt-1"})
		if code != 409 || u.str(m, "status") != "failed" || u.str(m, "reason") != "released" {
			t.Fatalf("retry of a released attempt: %d %v", code, m)
		}
		cid, ans, _, path = u.creds2()
		code, m = u.do("POST", path, map[string]string{"token": tok, "captcha_id": cid, "captcha": ans, "request_id": "attempt-2"})
		if code != 202 {
			t.Fatalf("a new attempt with the same token: %d %v", code, m)
		}
		waitOrders(t, a, 6, 1)
		_, m = u.do("GET", "/api/result/"+resv, nil)
		if u.str(m, "status") != "failed" {
			t.Fatalf("result of the released reservation: %v", m)
		}
	})
}

// TestRetryWhileFrozenIsNotRefused: while Redis's copy of the sale is
// frozen for a rebuild (it lost its state: a restart, a failover), the
// ledger cannot tell whether a retried attempt reserved — its message may be
// on its way to an order — so the retry answers 503 busy before any step
// that could refuse it for good, here an access token the lost pool no
// longer knows. Before, it answered 403 token, and the crash test saw that
// attempt become an order ("1 refused attempts became orders"). After the
// rebuild the same retry goes through.
func TestRetryWhileFrozenIsNotRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, base := startApp(t, embeddedConfig(20, 10))
	u := login(t, base, "user6")
	cid, ans, tok, path := u.creds()
	_, _, lost, _ := login(t, base, "user7").creds() // a well-formed token this buyer's pool entry does not hold
	d := app.Stock(a)
	act := "1"
	if err := d.Freeze(ctx, act); err != nil {
		t.Fatal(err)
	}
	code, m := u.do("POST", path, map[string]string{"token": lost, "captcha_id": cid, "captcha": ans, "request_id": "during-rebuild"})
	if code != 503 || u.str(m, "status") != "busy" {
		t.Fatalf("retry while frozen: %d %v, want 503 busy (not a final refusal)", code, m)
	}
	if err := d.Unfreeze(ctx, act); err != nil {
		t.Fatal(err)
	}
	// Nothing was spent: the same captcha and token buy after the rebuild.
	code, m = u.do("POST", path, map[string]string{"token": tok, "captcha_id": cid, "captcha": ans, "request_id": "during-rebuild"})
	if code != 202 || u.str(m, "status") != "queued" {
		t.Fatalf("retry after the rebuild: %d %v, want 202 queued", code, m)
	}
	waitOrders(t, a, 6, 1)
}

// TestAttemptIDOfAnotherBuyer: an attempt whose reservation ID is in the
// ledger under another buyer is refused before any step that replays or
// orders it, and costs its buyer nothing. Before, the retry path took the
// other buyer's reservation as this buyer's own and handed an order
// message for it on (what "u<user>-<request ID>" allowed for users "1"
// with "2-x" and "1-2" with "x").
func TestAttemptIDOfAnotherBuyer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, base := startApp(t, embeddedConfig(20, 10))
	u := login(t, base, "user7")
	cid, ans, tok, path := u.creds()
	resv := app.ClientReservationID("7", "attempt-1")
	if res, err := app.ReserveAs(ctx, a, "8", resv); err != nil || res.Status != stock.Reserved {
		t.Fatalf("stage user 8's reservation under user 7's attempt ID: %v %v", res, err)
	}
	code, m := u.do("POST", path, map[string]string{"token": tok, "captcha_id": cid, "captcha": ans, "request_id": "attempt-1"})
	if code != 409 || u.str(m, "status") != "bad_request" {
		t.Fatalf("attempt naming user 8's reservation: %d %v (want 409 bad_request)", code, m)
	}
	if held, err := app.Held(ctx, a, "7"); err != nil || held != 0 {
		t.Fatalf("user 7 holds %d, %v: want 0", held, err)
	}
	if held, err := app.Held(ctx, a, "8"); err != nil || held != 1 {
		t.Fatalf("user 8 holds %d, %v: want 1 (untouched)", held, err)
	}
	// Nothing of user 7's was spent: a new attempt with the same token and
	// captcha buys, and it is user 7's only order.
	code, m = u.do("POST", path, map[string]string{"token": tok, "captcha_id": cid, "captcha": ans, "request_id": "attempt-2"})
	if code != 202 || u.str(m, "reservation") != app.ClientReservationID("7", "attempt-2") {
		t.Fatalf("new attempt: %d %v", code, m)
	}
	waitOrders(t, a, 7, 1)
	var orders int64
	if err := app.DB(a).Raw("SELECT COUNT(*) FROM seckill_order WHERE reservation_id = ?", resv).Scan(&orders).Error; err != nil || orders != 0 {
		t.Fatalf("orders of user 8's reservation: %d %v (want 0: nobody submitted it)", orders, err)
	}
	// The staged reservation has no message: release it as the reconciler
	// would after its grace, so the shutdown's drain has nothing in flight.
	if err := app.ReleaseFenced(ctx, a, "8", resv); err != nil {
		t.Fatal(err)
	}
}
