package app_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/seckillkit/seckill/examples/fullstack/app"
)

// rawDo sends one hand-written request and returns the status code, the
// headers and the body. No redirect is followed.
func rawDo(t *testing.T, method, url string, hdr map[string]string, body string) (int, http.Header, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	c := &http.Client{Timeout: time.Minute, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	m := map[string]any{}
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Errorf("%s %s: %d answered %q, not JSON", method, url, resp.StatusCode, raw)
	}
	return resp.StatusCode, resp.Header, m
}

// wantErrShape checks the API's one error shape: {"status","message"}
// and nothing else.
func wantErrShape(t *testing.T, what string, m map[string]any) {
	t.Helper()
	if _, ok := m["status"].(string); !ok || len(m) != 2 {
		t.Errorf("%s: body %v is not the API error shape {status, message}", what, m)
	}
	if _, ok := m["message"].(string); !ok {
		t.Errorf("%s: body %v has no message", what, m)
	}
}

// TestHardenedHTTP covers the HTTP edge of the service: every refusal in one
// JSON shape, no redirect on API paths, JSON bodies only, canonical
// usernames, bounded headers.
func TestHardenedHTTP(t *testing.T) {
	_, base := startApp(t, embeddedConfig(20, 5))

	t.Run("no redirect on API paths", func(t *testing.T) {
		for _, p := range []string{"/api/../api/activity", "/api/./activity", "//api/activity", "/api/%2e%2e/api/activity", "/api/activity/"} {
			code, h, m := rawDo(t, "GET", base+p, nil, "")
			if code >= 300 && code < 400 {
				t.Errorf("GET %s: %d redirect to %q", p, code, h.Get("Location"))
				continue
			}
			if code != http.StatusBadRequest && code != http.StatusNotFound {
				t.Errorf("GET %s: %d, want 400 or 404", p, code)
			}
			wantErrShape(t, "GET "+p, m)
		}
	})

	t.Run("unknown route and method in the error shape", func(t *testing.T) {
		code, _, m := rawDo(t, "GET", base+"/api/nope", nil, "")
		if code != http.StatusNotFound {
			t.Errorf("unknown path: %d, want 404", code)
		}
		wantErrShape(t, "unknown path", m)
		code, h, m := rawDo(t, "DELETE", base+"/api/login", nil, "")
		if code != http.StatusMethodNotAllowed || !strings.Contains(h.Get("Allow"), "POST") {
			t.Errorf("wrong method: %d Allow=%q, want 405 with POST allowed", code, h.Get("Allow"))
		}
		wantErrShape(t, "wrong method", m)
	})

	t.Run("auth refusals in the error shape", func(t *testing.T) {
		for name, hdr := range map[string]map[string]string{
			"no token":        nil,
			"malformed token": {"Authorization": "Bearer"},
			"unknown token":   {"Authorization": "Bearer 0123456789abcdef0123456789abcdef"},
		} {
			code, _, m := rawDo(t, "GET", base+"/api/captcha", hdr, "")
			if code != http.StatusUnauthorized {
				t.Errorf("%s: %d, want 401", name, code)
			}
			wantErrShape(t, name, m)
		}
	})

	t.Run("JSON bodies only", func(t *testing.T) {
		body := `{"username":"user1"}`
		for _, ct := range []string{"", "text/plain", "application/x-www-form-urlencoded", "application/jsonx"} {
			code, _, m := rawDo(t, "POST", base+"/api/login", map[string]string{"Content-Type": ct}, body)
			if code != http.StatusUnsupportedMediaType {
				t.Errorf("login with Content-Type %q: %d, want 415", ct, code)
			}
			wantErrShape(t, "Content-Type "+ct, m)
		}
		if code, _, m := rawDo(t, "POST", base+"/api/login", map[string]string{"Content-Type": "application/json; charset=utf-8"}, body); code != http.StatusOK {
			t.Errorf("login with JSON and a charset: %d %v", code, m)
		}
		code, _, m := rawDo(t, "POST", base+"/api/login", map[string]string{"Content-Type": "application/json"}, `{"username":"user1","admin":true}`)
		if code != http.StatusBadRequest {
			t.Errorf("unknown field: %d, want 400", code)
		}
		wantErrShape(t, "unknown field", m)
	})

	t.Run("canonical usernames", func(t *testing.T) {
		for _, name := range []string{"user+1", "user01", "User1", " user1", "user1 ", "1", "user", "user-1", "user1\x00", "usér1", "user99999999999999999999"} {
			b, _ := json.Marshal(map[string]string{"username": name})
			code, _, m := rawDo(t, "POST", base+"/api/login", map[string]string{"Content-Type": "application/json"}, string(b))
			if code != http.StatusUnauthorized {
				t.Errorf("login as %q: %d %v, want 401", name, code, m)
			}
		}
		code, _, m := rawDo(t, "POST", base+"/api/login", map[string]string{"Content-Type": "application/json"}, `{"username":"user12"}`)
		if code != http.StatusOK || m["username"] != "user12" {
			t.Errorf("login as user12: %d %v", code, m)
		}
	})

	t.Run("header size bounded", func(t *testing.T) {
		req, _ := http.NewRequest("GET", base+"/api/activity", nil)
		req.Header.Set("X-Big", strings.Repeat("a", 64<<10))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("64 KiB header: %d, want 431", resp.StatusCode)
		}
	})
}

// TestTrickledBodyIsCutOff: a client that sends the headers of a POST and
// then trickles its body, or never ends its headers, must not hold the
// connection past the server's ReadTimeout. The SSE stream, which outlives
// it, is exempt.
func TestTrickledBodyIsCutOff(t *testing.T) {
	cfg := embeddedConfig(5, 2)
	ctx, cancel := context.WithTimeout(context.Background(), startBound)
	defer cancel()
	a, err := app.New(ctx, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	const rt = 300 * time.Millisecond
	app.SetReadTimeout(a, rt)
	base, err := a.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), stopBound)
		defer cancel()
		_ = a.Shutdown(ctx)
	})
	addr := strings.TrimPrefix(base, "http://")

	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// 20 bytes announced, 1 sent; the rest would follow byte by byte.
	if _, err := io.WriteString(conn, "POST /api/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 20\r\n\r\n{"); err != nil {
		t.Fatal(err)
	}
	// A bound, not an expectation: the server must give up long before it.
	_ = conn.SetReadDeadline(time.Now().Add(time.Minute))
	start := time.Now()
	buf := make([]byte, 512)
	for {
		_, err := conn.Read(buf)
		if err == nil {
			continue // an error answer, then the close
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("the server still held the connection after %v with a body trickling (ReadTimeout %v)", time.Since(start), rt)
		}
		break // EOF or reset: the server closed it
	}

	// Headers trickled without an end are cut off by the same ReadTimeout
	// (the server sets no separate ReadHeaderTimeout).
	hconn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer hconn.Close()
	if _, err := io.WriteString(hconn, "POST /api/login HTTP/1.1\r\nHost: x\r\nX-Slow: a"); err != nil {
		t.Fatal(err)
	}
	_ = hconn.SetReadDeadline(time.Now().Add(time.Minute)) // a bound, not an expectation
	hstart := time.Now()
	for {
		_, err := hconn.Read(buf)
		if err == nil {
			continue
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("the server still held the connection after %v with headers trickling (ReadTimeout %v)", time.Since(hstart), rt)
		}
		break
	}

	// The SSE stream outlives ReadTimeout (net/http clears the read
	// deadline once the handler runs): it still delivers events after
	// several ReadTimeouts have passed.
	u := login(t, base, "user1")
	req, _ := http.NewRequest("GET", base+"/api/events/r-none?ticket="+u.ticket("r-none"), nil)
	resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	events := 0
	deadline := time.Now().Add(4 * rt)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "data: ") {
			events++
			if time.Now().After(deadline) {
				break
			}
		}
	}
	if time.Now().Before(deadline) {
		t.Errorf("the SSE stream ended after %d events, before 4 × ReadTimeout (%v): %v", events, 4*rt, sc.Err())
	}
}

// tokenOwners counts the access tokens of activity 1 bound to a user,
// straight from the pool's owner hash in Redis.
func tokenOwners(t *testing.T, a *app.App) int64 {
	t.Helper()
	n, err := app.RedisClient(a).HLen(context.Background(), a.Config().KeyPrefix+"{a:1}:tok:owner").Result()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestTokenHoarding: access tokens are handed out only inside the sale's
// token window, and a user cannot hammer the endpoint. Before, 15 scripted
// sessions took every token of a 5-unit sale (pool 15) an hour before it
// started, and an ended sale still handed them out.
func TestTokenHoarding(t *testing.T) {
	t.Run("an hour early", func(t *testing.T) {
		cfg := embeddedConfig(30, 5)
		cfg.StartIn = time.Hour
		a, base := startApp(t, cfg)
		for i := 1; i <= 15; i++ {
			u := login(t, base, "user"+itoa(i))
			code, m := u.do("POST", "/api/activity/token", struct{}{})
			if code != http.StatusTooEarly || u.str(m, "status") != "not_started" {
				t.Errorf("user%d an hour before the start: %d %v, want 425 not_started", i, code, m)
			}
		}
		if n := tokenOwners(t, a); n != 0 {
			t.Errorf("%d access tokens taken an hour before the sale, want 0", n)
		}
	})
	t.Run("after the end", func(t *testing.T) {
		cfg := embeddedConfig(30, 5)
		cfg.StartIn = -2 * time.Hour
		cfg.Duration = time.Hour
		a, base := startApp(t, cfg)
		u := login(t, base, "user1")
		if code, m := u.do("POST", "/api/activity/token", struct{}{}); code != http.StatusGone || u.str(m, "status") != "ended" {
			t.Errorf("after the end: %d %v, want 410 ended", code, m)
		}
		if n := tokenOwners(t, a); n != 0 {
			t.Errorf("%d access tokens taken after the sale ended, want 0", n)
		}
	})
	t.Run("per-user window", func(t *testing.T) {
		a, base := startApp(t, embeddedConfig(30, 5))
		app.Miniredis(a).SetTime(time.Now()) // Redis time stands still: the window cannot roll over
		u := login(t, base, "user7")
		ok, limited := 0, 0
		for range 15 {
			code, m := u.do("POST", "/api/activity/token", struct{}{})
			switch code {
			case http.StatusOK:
				ok++
			case http.StatusTooManyRequests:
				limited++
			default:
				t.Fatalf("token request: %d %v", code, m)
			}
		}
		if ok != 10 || limited != 5 {
			t.Errorf("15 token requests in one minute: %d answered, %d limited; want 10 and 5", ok, limited)
		}
		if n := tokenOwners(t, a); n != 1 {
			t.Errorf("%d tokens bound, want 1 (the same token every time)", n)
		}
	})
}

// TestCaptchaAndStreamCaps: captcha generation and open SSE streams are
// capped per user (each costs CPU or a Redis poll a second). Before, one
// session could open 40 streams and ask for captchas without limit.
func TestCaptchaAndStreamCaps(t *testing.T) {
	a, base := startApp(t, embeddedConfig(30, 5))
	app.Miniredis(a).SetTime(time.Now()) // Redis time stands still: the window cannot roll over
	u := login(t, base, "user3")
	ok, limited := 0, 0
	for range 25 {
		code, _ := u.do("GET", "/api/captcha", nil)
		switch code {
		case http.StatusOK:
			ok++
		case http.StatusTooManyRequests:
			limited++
		default:
			t.Fatalf("captcha: %d", code)
		}
	}
	if ok != 20 || limited != 5 {
		t.Errorf("25 captchas in one minute: %d made, %d limited; want 20 and 5", ok, limited)
	}

	open := func() (*http.Response, error) {
		req, _ := http.NewRequest("GET", base+"/api/events/r-none?ticket="+u.ticket("r-none"), nil)
		return (&http.Client{Timeout: time.Minute}).Do(req)
	}
	var streams []*http.Response
	defer func() {
		for _, s := range streams {
			s.Body.Close()
		}
	}()
	for i := range 4 {
		resp, err := open()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("stream %d: %v %v", i+1, resp, err)
		}
		// The stream is registered once its first event arrives.
		if !bufio.NewScanner(resp.Body).Scan() {
			t.Fatalf("stream %d sent nothing", i+1)
		}
		streams = append(streams, resp)
	}
	resp, err := open()
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&m)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || m["status"] != "limited" {
		t.Errorf("a fifth stream: %d %v, want 429 limited", resp.StatusCode, m)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestSSETicket: the result stream takes a short-lived ticket bound to one
// user and one reservation, never the bearer token in the query string.
func TestSSETicket(t *testing.T) {
	a, base := startApp(t, embeddedConfig(10, 2))
	u, v := login(t, base, "user1"), login(t, base, "user2")
	get := func(q string) int {
		req, _ := http.NewRequest("GET", base+"/api/events/r-one"+q, nil)
		resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	tk := u.ticket("r-one")
	forged := tk[:len(tk)-2] + map[bool]string{true: "AA", false: "BB"}[!strings.HasSuffix(tk, "AA")]
	for name, q := range map[string]string{
		"nothing":                    "",
		"the bearer in the query":    "?access_token=" + u.bearer,
		"a forged ticket":            "?ticket=" + forged,
		"another reservation's":      "?ticket=" + u.ticket("r-two"),
		"another user's, re-signed?": "?ticket=" + strings.Replace(v.ticket("r-one"), "2~", "1~", 1),
	} {
		if code := get(q); code != http.StatusUnauthorized {
			t.Errorf("%s: %d, want 401", name, code)
		}
	}
	if code := get("?ticket=" + tk); code != http.StatusOK {
		t.Errorf("a good ticket: %d, want 200", code)
	}
	now := time.Now()
	if user, ok := app.CheckTicket(a, tk, "r-one", now); !ok || user != "1" {
		t.Errorf("the ticket checks out as %q %v, want user 1", user, ok)
	}
	if _, ok := app.CheckTicket(a, tk, "r-one", now.Add(2*time.Minute)); ok {
		t.Error("a ticket is still good two minutes later")
	}
	anon := &apiClient{t: t, base: base}
	if code, _ := anon.do("POST", "/api/events/r-one/ticket", nil); code != http.StatusUnauthorized {
		t.Errorf("a ticket without signing in: %d, want 401", code)
	}
}

// TestNotifierReadsNoDB: the consumer tells the push hub about each outcome
// from what it already knows, and only for a reservation a stream waits for.
// Before, it read the order's status back from the database for every order
// it settled, on the consumer goroutine, with nobody listening.
func TestNotifierReadsNoDB(t *testing.T) {
	const buyers = 8
	cfg := embeddedConfig(20, buyers)
	reads := app.CountQueries(&cfg, "order_no =")
	a, base := startApp(t, cfg)
	for i := 1; i <= buyers; i++ {
		u := login(t, base, "user"+itoa(i))
		cid, ans, tok, path := u.creds()
		if code, m := u.do("POST", path, map[string]string{"token": tok, "captcha_id": cid, "captcha": ans}); code != http.StatusAccepted {
			t.Fatalf("buy of user%d: %d %v", i, code, m)
		}
	}
	// Wait (bounded) until every buy is an order.
	deadline := time.Now().Add(drainBound)
	for {
		var n int64
		if err := app.DB(a).Table("seckill_order").Count(&n).Error; err != nil {
			t.Fatal(err)
		}
		if n == buyers {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d orders after %v", n, buyers, drainBound)
		}
		time.Sleep(20 * time.Millisecond) // polling the DB for a count, not synchronising with a goroutine
	}
	if n := reads(); n != 0 {
		t.Errorf("the workers read orders back by order_no %d times for %d orders nobody watched, want 0", n, buyers)
	}
}

// TestWebSocketPush: the result is pushed over a WebSocket with the same
// ticket and the same per-user stream cap as SSE, and a page of another
// origin cannot open it.
func TestWebSocketPush(t *testing.T) {
	_, base := startApp(t, embeddedConfig(10, 2))
	u := login(t, base, "user1")
	wsURL := "ws" + strings.TrimPrefix(base, "http") + "/api/ws/r-one"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	dialCode := func(url string, hdr http.Header) int {
		c, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: hdr})
		if err == nil {
			c.CloseNow()
			return http.StatusSwitchingProtocols
		}
		if resp == nil {
			t.Fatalf("dial %s: %v", url, err)
		}
		return resp.StatusCode
	}
	if code := dialCode(wsURL, nil); code != http.StatusUnauthorized {
		t.Errorf("no ticket: %d, want 401", code)
	}
	if code := dialCode(wsURL+"?ticket="+u.ticket("r-two"), nil); code != http.StatusUnauthorized {
		t.Errorf("another reservation's ticket: %d, want 401", code)
	}
	if code := dialCode(wsURL+"?ticket="+u.ticket("r-one"), http.Header{"Origin": {"http://evil.example"}}); code != http.StatusForbidden {
		t.Errorf("a page of another origin: %d, want 403", code)
	}

	// Four streams (two of each kind) fill the user's cap; a fifth of
	// either kind is refused.
	var open []*websocket.Conn
	defer func() {
		for _, c := range open {
			c.CloseNow()
		}
	}()
	for i := range 2 {
		c, _, err := websocket.Dial(ctx, wsURL+"?ticket="+u.ticket("r-one"), nil)
		if err != nil {
			t.Fatalf("WebSocket %d: %v", i+1, err)
		}
		_, msg, err := c.Read(ctx) // the first view is pushed at once
		var v map[string]any
		if err != nil || json.Unmarshal(msg, &v) != nil || v["reservation"] != "r-one" {
			t.Fatalf("WebSocket %d: first message %q %v", i+1, msg, err)
		}
		open = append(open, c)
	}
	var sse []*http.Response
	defer func() {
		for _, r := range sse {
			r.Body.Close()
		}
	}()
	for i := range 2 {
		req, _ := http.NewRequest("GET", base+"/api/events/r-one?ticket="+u.ticket("r-one"), nil)
		resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("SSE %d: %v %v", i+1, resp, err)
		}
		if !bufio.NewScanner(resp.Body).Scan() {
			t.Fatalf("SSE %d sent nothing", i+1)
		}
		sse = append(sse, resp)
	}
	if code := dialCode(wsURL+"?ticket="+u.ticket("r-one"), nil); code != http.StatusTooManyRequests {
		t.Errorf("a fifth stream (WebSocket): %d, want 429", code)
	}
}

// TestSignInOutsideDemo: outside demo mode nobody signs in by a seeded name;
// without an identity provider sign-in is refused as not configured, with
// one (Config.SignIn) its answer decides and its user ID is the session's.
func TestSignInOutsideDemo(t *testing.T) {
	cfg := embeddedConfig(10, 2)
	cfg.Demo = false
	_, base := startApp(t, cfg)
	anon := &apiClient{t: t, base: base}
	if code, m := anon.do("POST", "/api/login", map[string]string{"username": "user1"}); code != http.StatusServiceUnavailable {
		t.Errorf("a demo user outside demo mode, no identity provider: %d %v, want 503", code, m)
	}

	cfg = embeddedConfig(10, 2)
	cfg.Demo = false
	cfg.SignIn = func(_ context.Context, user, password string) (string, error) {
		if user == "alice" && password == "correct horse" {
			return "7c9e6679-7425-40de-944b-e07fc1f90ae7", nil
		}
		return "", app.ErrBadCredentials
	}
	_, base = startApp(t, cfg)
	anon = &apiClient{t: t, base: base}
	for _, bad := range []map[string]string{{"username": "user1"}, {"username": "alice", "password": "wrong"}, {"username": "alice"}} {
		if code, m := anon.do("POST", "/api/login", bad); code != http.StatusUnauthorized {
			t.Errorf("login %v: %d %v, want 401", bad, code, m)
		}
	}
	code, m := anon.do("POST", "/api/login", map[string]string{"username": "alice", "password": "correct horse"})
	if code != http.StatusOK || m["user_id"] != "7c9e6679-7425-40de-944b-e07fc1f90ae7" {
		t.Fatalf("alice: %d %v", code, m)
	}
	// The session is the provider's user: the captcha endpoint takes it.
	u := &apiClient{t: t, base: base, bearer: anon.str(m, "token")}
	if code, m := u.do("GET", "/api/captcha", nil); code != http.StatusOK {
		t.Errorf("captcha for alice's session: %d %v", code, m)
	}
}

// TestMetricsAndHealthNeedTheToken: /metrics and the health details are the
// operator's. Outside demo mode without a metrics token /metrics does not
// exist and /healthz says only ok or degraded; with one, a caller without it
// gets 401 and the bare health, the operator everything. Before, both were
// open to anyone.
func TestMetricsAndHealthNeedTheToken(t *testing.T) {
	cfg := embeddedConfig(10, 2)
	cfg.Demo = false
	_, base := startApp(t, cfg)
	code, _, m := rawDo(t, "GET", base+"/metrics", nil, "")
	if code != http.StatusNotFound {
		t.Errorf("/metrics without a metrics token configured: %d, want 404", code)
	}
	wantErrShape(t, "/metrics", m)
	code, _, m = rawDo(t, "GET", base+"/healthz", nil, "")
	if code != http.StatusOK || len(m) != 1 || m["status"] != "ok" {
		t.Errorf("/healthz for anyone: %d %v, want 200 {\"status\":\"ok\"} only", code, m)
	}

	cfg = embeddedConfig(10, 2)
	cfg.Demo = false
	cfg.MetricsToken = randHex(16)
	_, base = startApp(t, cfg)
	for _, hdr := range []map[string]string{nil, {"Authorization": "Bearer wrong-token-0123456789"}, {"Authorization": cfg.MetricsToken}} {
		code, h, m := rawDo(t, "GET", base+"/metrics", hdr, "")
		if code != http.StatusUnauthorized || h.Get("WWW-Authenticate") != "Bearer" {
			t.Errorf("/metrics with %v: %d, want 401 with WWW-Authenticate", hdr, code)
		}
		wantErrShape(t, "/metrics", m)
	}
	op := map[string]string{"Authorization": "Bearer " + cfg.MetricsToken}
	req, _ := http.NewRequest("GET", base+"/metrics", nil)
	req.Header.Set("Authorization", op["Authorization"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "seckill_reservations_in_flight") {
		t.Errorf("/metrics for the operator: %d, %d bytes", resp.StatusCode, len(body))
	}
	if code, _, m := rawDo(t, "GET", base+"/healthz", nil, ""); code != http.StatusOK || len(m) != 1 {
		t.Errorf("/healthz without the token: %d %v, want the status only", code, m)
	}
	if code, _, m := rawDo(t, "GET", base+"/healthz", op, ""); code != http.StatusOK || m["breaker_redis"] != "closed" || m["redis"] != "miniredis" {
		t.Errorf("/healthz for the operator: %d %v, want the details", code, m)
	}
	cfg.MetricsToken = "short"
	if err := cfg.Validate(); err == nil {
		t.Error("a 5-byte metrics token was accepted")
	}
}
