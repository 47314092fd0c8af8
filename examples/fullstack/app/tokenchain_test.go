package app_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/seckillkit/seckill/admin"
	"github.com/seckillkit/seckill/breaker"
	"github.com/seckillkit/seckill/checkout"
	"github.com/seckillkit/seckill/examples/fullstack/app"
	"github.com/seckillkit/seckill/observe"
)

// TestTokenChainGuardsAsTheBuyChain (#23 item 11): the access-token
// request's chain has the buy chain's shape and breaker rule. Each token
// step is guarded exactly when the buy step of the same role is; a request
// asks the Redis breaker once per guarded step it runs, on the buy and on
// the token request alike — also when the token request gives a spent,
// unused token back (before: its own breaker call around each of its Redis
// calls, four admissions instead of two).
func TestTokenChainGuardsAsTheBuyChain(t *testing.T) {
	cfg := embeddedConfig(10, 5)
	var admissions atomic.Int64
	cfg.Observer = observe.Func(func(_ context.Context, e observe.Event) {
		if e.Stage == breaker.StageCall && e.Name == "redis" {
			admissions.Add(1)
		}
	})
	a, base := startApp(t, cfg)

	// The rule, step by step: the same role, the same guard.
	buy := map[string]bool{}
	for _, s := range app.Checkout(a).Steps() {
		buy[s.Name] = s.Guarded
	}
	role := map[string]string{"token_window": checkout.StepWindow, "soldout": checkout.StepSoldOut,
		"token_risk": checkout.StepRisk, "token_limit": checkout.StepUserLimit, "token": checkout.StepToken}
	guardedTokenSteps := int64(0)
	for _, s := range app.TokenChain() {
		r, ok := role[s.Name]
		if !ok {
			t.Fatalf("token step %q has no counterpart in the buy chain: name its role here", s.Name)
		}
		if g, ok := buy[r]; !ok || g != s.Guarded {
			t.Errorf("token step %q guarded=%v; the buy's %q guarded=%v (present %v)", s.Name, s.Guarded, r, g, ok)
		}
		if s.Guarded {
			guardedTokenSteps++
		}
	}
	// One more for the fused admission's script (captcha + access token,
	// checkout README "Fused admission"), which runs inside the breaker
	// too; each guarded step still runs inside it.
	guardedBuySteps := int64(1)
	for _, g := range buy {
		if g {
			guardedBuySteps++
		}
	}

	u := login(t, base, "user1")
	count := func(what string, want int64, f func()) {
		t.Helper()
		before := admissions.Load()
		f()
		if got := admissions.Load() - before; got != want {
			t.Errorf("%s: %d admissions of the Redis breaker, want %d (one per guarded step, and the fused admission's script for a buy)", what, got, want)
		}
	}
	var tok string
	count("a token request", guardedTokenSteps, func() {
		code, m := u.do("POST", "/api/activity/token", struct{}{})
		if tok = u.str(m, "token"); code != http.StatusOK || tok == "" {
			t.Fatalf("token: %d %v", code, m)
		}
	})
	// Spent by an attempt that then died: the buyer holds nothing, so the
	// request gives the same token back (three Redis calls, one step).
	if err := app.ConsumeToken(context.Background(), a, "1", tok); err != nil {
		t.Fatal(err)
	}
	count("a token request that gives a spent token back", guardedTokenSteps, func() {
		code, m := u.do("POST", "/api/activity/token", struct{}{})
		if code != http.StatusOK || u.str(m, "token") != tok {
			t.Fatalf("token back: %d %v, want 200 and %s", code, m, tok)
		}
	})
	cid, ans, tok, path := u.creds()
	count("an accepted buy", guardedBuySteps, func() {
		code, m := u.do("POST", path, map[string]string{"token": tok, "captcha_id": cid, "captcha": ans})
		if code != http.StatusAccepted {
			t.Fatalf("buy: %d %v", code, m)
		}
	})
}

// The buyer API's refusals decode as admin.ErrorAnswer, the one error type
// of the library's HTTP APIs (#23 item 12), nothing left over: the app's
// own (an unknown sale, a path no route serves) and checkout's.
func TestBuyerErrorsDecodeAsErrorAnswer(t *testing.T) {
	_, base := startApp(t, embeddedConfig(2, 1))
	u := login(t, base, "user1")
	for _, tc := range []struct {
		method, path string
		code         int
		status       string
	}{
		{"POST", "/api/buy/no-such-sale/sig", http.StatusNotFound, "token"},
		{"GET", "/api/no-such-path", http.StatusNotFound, "not_found"},
	} {
		req, _ := http.NewRequest(tc.method, base+tc.path, strings.NewReader("{}"))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+u.bearer)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var e admin.ErrorAnswer
		dec := json.NewDecoder(resp.Body)
		dec.DisallowUnknownFields()
		err = dec.Decode(&e)
		resp.Body.Close()
		if err != nil || resp.StatusCode != tc.code || e.Status != tc.status || e.Message == "" {
			t.Errorf("%s %s: %d %+v (%v); want %d and status %q as admin.ErrorAnswer", tc.method, tc.path, resp.StatusCode, e, err, tc.code, tc.status)
		}
	}
}
