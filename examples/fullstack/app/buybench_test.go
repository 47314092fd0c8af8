package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/seckillkit/seckill/examples/fullstack/app"
)

// benchCall is one JSON API call of the benchmark's setup.
func benchCall(tb testing.TB, base, method, path, bearer string, body any) (int, map[string]any) {
	tb.Helper()
	var rd io.Reader = http.NoBody
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, base+path, rd)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out := map[string]any{}
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// benchBuyer signs user in and returns its bearer, its buy path and the
// JSON body of a buy with a fresh captcha, access token and request ID.
func benchBuyer(tb testing.TB, base, user, requestID string) (bearer, path string, body []byte) {
	tb.Helper()
	_, m := benchCall(tb, base, "POST", "/api/login", "", map[string]string{"username": user})
	bearer, _ = m["token"].(string)
	_, m = benchCall(tb, base, "GET", "/api/captcha?image=none", bearer, nil)
	id, _ := m["id"].(string)
	answer, _ := m["demo_answer"].(string)
	_, m = benchCall(tb, base, "POST", "/api/activity/token", bearer, struct{}{})
	tok, _ := m["token"].(string)
	path, _ = m["path"].(string)
	if path == "" {
		_, m = benchCall(tb, base, "GET", "/api/activity/path", bearer, nil)
		path, _ = m["path"].(string)
	}
	if bearer == "" || id == "" || answer == "" || path == "" {
		tb.Fatalf("%s: credentials incomplete: %q %q %q %q", user, bearer, id, answer, path)
	}
	body, _ = json.Marshal(map[string]string{"token": tok, "captcha_id": id, "captcha": answer, "request_id": requestID})
	return bearer, path, body
}

// soldOutSale starts the embedded service with one unit and users demo
// users, sells the unit to user1 (attempt "winner1") and lets user2 be
// refused, which sets the sold-out flag. It returns the service, its base
// URL and the winner's bearer, path and body; tb's cleanup shuts it down.
func soldOutSale(tb testing.TB, users int) (a *app.App, base, bearer, path string, body []byte) {
	tb.Helper()
	cfg := app.DefaultConfig()
	cfg.Addr, cfg.StartIn, cfg.DemoUsers, cfg.Stock, cfg.Demo, cfg.LogLevel = "127.0.0.1:0", 0, users, 1, true, "warn"
	a, err := app.New(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		tb.Fatal(err)
	}
	if base, err = a.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = a.Shutdown(context.Background()) })
	bearer, path, body = benchBuyer(tb, base, "user1", "winner1")
	if code, m := benchCall(tb, base, "POST", path, bearer, json.RawMessage(body)); code != http.StatusAccepted {
		tb.Fatalf("first buy: %d %v", code, m)
	}
	lb, lp, lbody := benchBuyer(tb, base, "user2", "loser2")
	if code, m := benchCall(tb, base, "POST", lp, lb, json.RawMessage(lbody)); code != http.StatusConflict {
		tb.Fatalf("second buy: %d %v, want 409", code, m)
	}
	return a, base, bearer, path, body
}

// BenchmarkBuySoldOut is the buy handler's CPU for the answer most buys of
// a sale get: signed in, a valid path and body, refused by the in-process
// sold-out flag (the embedded service, the handler called in-process: no
// TCP, no generator).
func BenchmarkBuySoldOut(b *testing.B) {
	a, base, _, _, _ := soldOutSale(b, 10)
	bearer, path, body := benchBuyer(b, base, "user3", "loser3")
	h := a.Handler()
	req := httptest.NewRequest("POST", path, nil)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+bearer)
	req.ContentLength = int64(len(body))
	rd := bytes.NewReader(body)
	w := &benchWriter{h: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		rd.Reset(body)
		req.Body = io.NopCloser(rd)
		clear(w.h)
		w.code, w.body = 0, w.body[:0]
		h.ServeHTTP(w, req)
		// 409 sold out; once a second one buy goes on to ask the DB pool
		// (the app's poolSoldOut) and is refused further down the chain.
		if w.code < 400 || w.code >= 500 {
			b.Fatalf("buy: %d %s", w.code, w.body)
		}
	}
}

// benchWriter is a reusable ResponseWriter that keeps the code and body.
type benchWriter struct {
	h    http.Header
	code int
	body []byte
}

func (w *benchWriter) Header() http.Header { return w.h }
func (w *benchWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}
func (w *benchWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	w.body = append(w.body, b...)
	return len(b), nil
}
