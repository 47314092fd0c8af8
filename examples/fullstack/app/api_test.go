package app_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/seckillkit/seckill/examples/fullstack/app"
)

type apiClient struct {
	t      *testing.T
	base   string
	bearer string
}

func (c *apiClient) do(method, path string, body any) (int, map[string]any) {
	c.t.Helper()
	var rd *bytes.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, _ := http.NewRequest(method, c.base+path, rd)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.bearer != "" {
		req.Header.Set("Authorization", "Bearer "+c.bearer)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out := map[string]any{}
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// ticket asks for an SSE ticket of resv.
func (c *apiClient) ticket(resv string) string {
	c.t.Helper()
	code, m := c.do("POST", "/api/events/"+resv+"/ticket", nil)
	if code != 200 || c.str(m, "ticket") == "" {
		c.t.Fatalf("ticket for %s: %d %v", resv, code, m)
	}
	return c.str(m, "ticket")
}

func (c *apiClient) str(m map[string]any, k string) string { s, _ := m[k].(string); return s }

func login(t *testing.T, base, user string) *apiClient {
	c := &apiClient{t: t, base: base}
	code, m := c.do("POST", "/api/login", map[string]string{"username": user})
	if code != 200 {
		t.Fatalf("login %s: %d %v", user, code, m)
	}
	c.bearer = c.str(m, "token")
	return c
}

// creds fetches a captcha (+ demo answer), an access token and the path.
func (c *apiClient) creds() (captchaID, answer, tok, path string) {
	c.t.Helper()
	_, m := c.do("GET", "/api/captcha", nil)
	captchaID = c.str(m, "id")
	if !strings.HasPrefix(c.str(m, "image"), "data:image/") {
		c.t.Fatalf("captcha without image: %v", m)
	}
	_, m = c.do("GET", "/api/demo/captcha/"+captchaID, nil)
	answer = c.str(m, "answer")
	_, m = c.do("POST", "/api/activity/token", struct{}{})
	tok = c.str(m, "token")
	_, m = c.do("GET", "/api/activity/path", nil)
	path = c.str(m, "path")
	if captchaID == "" || answer == "" || tok == "" || path == "" {
		c.t.Fatalf("credentials incomplete: %q %q %q %q", captchaID, answer, tok, path)
	}
	return
}

// TestAPIRefusalsAndPay walks the API's refusal paths (each must be refused,
// and refused for the right reason), then a buy, the SSE push, and pay.
func TestAPIRefusalsAndPay(t *testing.T) {
	cfg := embeddedConfig(10, 2)
	cfg.UserRate = 100 // this test makes many attempts as one user on purpose
	_, base := startApp(t, cfg)
	anon := &apiClient{t: t, base: base}
	if code, _ := anon.do("POST", "/api/login", map[string]string{"username": "user11"}); code != 401 {
		t.Errorf("login of a non-demo user: %d, want 401", code)
	}
	if code, _ := anon.do("GET", "/api/captcha", nil); code != 401 {
		t.Errorf("captcha without a session: %d, want 401", code)
	}

	u1, u2 := login(t, base, "user1"), login(t, base, "user2")
	cid, ans, tok, path := u1.creds()

	// Someone else's signed path.
	_, _, tok2, path2 := u2.creds()
	if code, m := u1.do("POST", path2, map[string]string{"token": tok, "captcha_id": cid, "captcha": ans}); code != 403 || u1.str(m, "status") != "token" {
		t.Errorf("another user's path: %d %v", code, m)
	}
	// Forged signature.
	forged := path[:len(path)-3] + "AAA"
	if code, m := u1.do("POST", forged, map[string]string{"token": tok, "captcha_id": cid, "captcha": ans}); code != 403 {
		t.Errorf("forged path: %d %v", code, m)
	}
	// Someone else's access token (it passes the captcha, which is then spent).
	if code, m := u1.do("POST", path, map[string]string{"token": tok2, "captcha_id": cid, "captcha": ans}); code != 403 || u1.str(m, "status") != "token" {
		t.Errorf("another user's access token: %d %v", code, m)
	}
	cid, ans, _, _ = u1.creds2()
	// Wrong captcha (the challenge survives a first wrong answer).
	if code, m := u1.do("POST", path, map[string]string{"token": tok, "captcha_id": cid, "captcha": ans + "x"}); code != 400 || u1.str(m, "status") != "captcha" {
		t.Errorf("wrong captcha: %d %v", code, m)
	}

	// The real thing.
	code, m := u1.do("POST", path, map[string]string{"token": tok, "captcha_id": cid, "captcha": ans})
	if code != 202 || u1.str(m, "status") != "queued" {
		t.Fatalf("buy: %d %v", code, m)
	}
	resv := u1.str(m, "reservation")

	// Replays: the same captcha, the same access token.
	if code, m := u1.do("POST", path, map[string]string{"token": tok, "captcha_id": cid, "captcha": ans}); code < 400 {
		t.Errorf("replayed buy accepted: %d %v", code, m)
	}
	cid, ans, _, path = u1.creds2()
	if code, m := u1.do("POST", path, map[string]string{"token": tok, "captcha_id": cid, "captcha": ans}); code != 409 || u1.str(m, "status") != "already_bought" {
		t.Errorf("second buy with a used token: %d %v", code, m)
	}

	// The result is pushed over SSE.
	req, _ := http.NewRequest("GET", base+"/api/events/"+resv+"?ticket="+u1.ticket(resv), nil)
	resp, err := (&http.Client{Timeout: 2 * time.Minute}).Do(req) // a bound: the stream ends at the result
	if err != nil {
		t.Fatal(err)
	}
	var ev map[string]any
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if line, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			_ = json.Unmarshal([]byte(line), &ev)
			if ev["status"] != "queued" {
				break
			}
		}
	}
	resp.Body.Close()
	if ev["status"] != "created" || ev["order_no"] == "" {
		t.Fatalf("pushed result: %v", ev)
	}
	orderNo := ev["order_no"].(string)

	// Pay: only the owner, once (a repeat is success), then the status says so.
	if code, _ := u2.do("POST", "/api/pay", map[string]string{"order_no": orderNo}); code != 404 {
		t.Errorf("paying someone else's order: %d", code)
	}
	for i := 0; i < 2; i++ {
		if code, m := u1.do("POST", "/api/pay", map[string]string{"order_no": orderNo}); code != 200 {
			t.Errorf("pay #%d: %d %v", i+1, code, m)
		}
	}
	if _, m := u1.do("GET", "/api/result/"+resv, nil); u1.str(m, "status") != "paid" {
		t.Errorf("result after pay: %v", m)
	}
	// The result is looked up by reservation: another user asking for u1's
	// reservation, or anyone for an unknown one, learns nothing.
	if _, m := u2.do("GET", "/api/result/"+resv, nil); u2.str(m, "status") != "unknown" || u2.str(m, "order_no") != "" {
		t.Errorf("someone else's reservation: %v", m)
	}
	for _, bogus := range []string{"no-such-reservation", "%20"} {
		if code, m := u1.do("GET", "/api/result/"+bogus, nil); code != 200 || u1.str(m, "status") != "unknown" {
			t.Errorf("unknown reservation %q: %d %v", bogus, code, m)
		}
	}
	if code, m := anon.do("GET", "/healthz", nil); code != 200 || m["status"] != "ok" {
		t.Errorf("healthz: %d %v", code, m)
	}
	if code, _ := anon.do("GET", "/metrics", nil); code != 200 {
		t.Errorf("metrics: %d", code)
	}
}

// creds2 is creds without a new access token (the user already used it).
func (c *apiClient) creds2() (captchaID, answer, tok, path string) {
	c.t.Helper()
	_, m := c.do("GET", "/api/captcha", nil)
	captchaID = c.str(m, "id")
	_, m = c.do("GET", "/api/demo/captcha/"+captchaID, nil)
	answer = c.str(m, "answer")
	_, m = c.do("GET", "/api/activity/path", nil)
	path = c.str(m, "path")
	return
}

// TestAccessTokenRestoredOnRetryableFailure: a buy whose reservation cannot
// be made for a reason the user can retry (here Redis's clock says the sale
// has not started while the server's says it has) gives the access token
// back, so the retry with the same token is not refused as already used.
func TestAccessTokenRestoredOnRetryableFailure(t *testing.T) {
	t.Parallel()
	a, base := startApp(t, embeddedConfig(20, 5))
	mini := app.Miniredis(a)
	if mini == nil {
		t.Skip("needs the embedded Redis to move its clock")
	}
	u := login(t, base, "user3")
	cid, ans, tok, path := u.creds()
	// Redis's clock 30 s behind the sale start, read from the server: the
	// reservation is refused however long this test took to get here, and
	// the access token (bound after the start, for 5 minutes) stays live.
	mini.SetTime(saleStart(t, base).Add(-30 * time.Second))
	code, m := u.do("POST", path, map[string]string{"token": tok, "captcha_id": cid, "captcha": ans})
	if code != 425 || u.str(m, "status") != "not_started" {
		t.Fatalf("buy while Redis's clock is behind: %d %v", code, m)
	}
	mini.SetTime(time.Time{})      // back on the real clock
	cid, ans, _, path = u.creds2() // the captcha is single-use; the token is not spent
	code, m = u.do("POST", path, map[string]string{"token": tok, "captcha_id": cid, "captcha": ans})
	if code != 202 || u.str(m, "status") != "queued" {
		t.Fatalf("retry with the same access token: %d %v", code, m)
	}
	// and it is spent now
	cid, ans, _, path = u.creds2()
	if code, m = u.do("POST", path, map[string]string{"token": tok, "captcha_id": cid, "captcha": ans}); code != 409 {
		t.Fatalf("third use of the token: %d %v", code, m)
	}
}

// TestLogout: POST /api/logout ends the session at once: the store's key is
// gone and the same bearer is refused 401 on this instance (its session
// cache forgot it), while another session of the same user still works.
// Before, there was no way to end a session (404).
func TestLogout(t *testing.T) {
	t.Parallel()
	a, base := startApp(t, embeddedConfig(5, 5))
	u, other := login(t, base, "user1"), login(t, base, "user1")
	if code, m := u.do("GET", "/api/activity/path", nil); code != 200 {
		t.Fatalf("path before logout: %d %v", code, m) // the session is cached now
	}
	keysBefore := sessionKeys(t, a)
	if code, m := u.do("POST", "/api/logout", nil); code != http.StatusNoContent {
		t.Fatalf("logout: %d %v", code, m)
	}
	if got := sessionKeys(t, a); got != keysBefore-1 {
		t.Fatalf("session keys %d after logout, want %d", got, keysBefore-1)
	}
	if code, m := u.do("GET", "/api/activity/path", nil); code != http.StatusUnauthorized {
		t.Fatalf("the logged-out bearer: %d %v, want 401", code, m)
	}
	if code, m := u.do("POST", "/api/logout", nil); code != http.StatusUnauthorized {
		t.Fatalf("a second logout: %d %v, want 401", code, m)
	}
	if code, m := other.do("GET", "/api/activity/path", nil); code != 200 {
		t.Fatalf("the user's other session: %d %v", code, m)
	}
}

// sessionKeys counts a's session keys in Redis.
func sessionKeys(t *testing.T, a *app.App) int {
	t.Helper()
	keys, err := app.RedisClient(a).Keys(context.Background(), "*risk:{s:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	return len(keys)
}
