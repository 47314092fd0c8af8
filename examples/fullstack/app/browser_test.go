package app_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/seckillkit/seckill/examples/fullstack/app"
	"github.com/seckillkit/seckill/order"
)

// findChromium returns a Chromium/Chrome binary, or "" when none is installed.
func findChromium() string {
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "/usr/bin/chromium"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// slowFront serves target through a reverse proxy that puts the page in the
// worst case for its clock:
//
//   - every GET /api/activity is held for hold before it reaches the
//     server, so the server reads its clock (server_time) at the very end
//     of the round trip, as a loaded server does (hold stands for time in
//     queues, not for synchronisation);
//   - the page is served with the client's clock (Date.now, new Date())
//     skew ahead of the real one, as a user's badly set computer has it.
//
// A page that guesses the server's clock from the middle of the round trip
// runs hold/2 early; one that trusts the client's clock runs skew early.
func slowFront(t *testing.T, target string, hold, skew time.Duration) string {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	proxy.FlushInterval = -1 // SSE goes through at once
	skewScript := fmt.Sprintf(`<script>(() => {
  const Real = Date, skew = %d;
  class Skewed extends Real {
    constructor(...a) { if (a.length === 0) super(Real.now() + skew); else super(...a); }
    static now() { return Real.now() + skew; }
  }
  window.Date = Skewed;
})();</script>
`, skew.Milliseconds())
	const appScript = `<script src="/static/app.js">`
	proxy.ModifyResponse = func(resp *http.Response) error {
		if resp.Request.URL.Path != "/" || resp.StatusCode != http.StatusOK {
			return nil
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		if !bytes.Contains(body, []byte(appScript)) {
			return fmt.Errorf("page has no %s to put the skewed clock before", appScript)
		}
		body = bytes.Replace(body, []byte(appScript), []byte(skewScript+appScript), 1)
		resp.Body = io.NopCloser(bytes.NewReader(body))
		resp.ContentLength = int64(len(body))
		resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
		return nil
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/activity" {
			select {
			case <-time.After(hold):
			case <-r.Context().Done():
				return
			}
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// saleStart reads the sale's start from the server's /api/activity.
func saleStart(t *testing.T, base string) time.Time {
	t.Helper()
	_, m := (&apiClient{t: t, base: base}).do("GET", "/api/activity", nil)
	s, _ := m["start_time"].(string)
	start, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("activity start_time %q: %v", s, err)
	}
	return start
}

// TestBrowserBuy drives the real page in headless Chromium: sign in, solve
// the captcha through the demo-only hook (the "demo: fill captcha" button,
// shown only with -demo), buy, and see the order number pushed back.
//
// The page must open the buy button on the server's clock, never before the
// server's start, whatever the client's clock says and however late in a
// slow round trip the server reads its clock (slowFront); the test waits for
// the state the page shows (the button enabled), never for an instant of its
// own. A buy that is refused as "not started" all the same (here: Redis's
// clock is behind the server's) must say so and leave the page usable: the
// retry then buys.
func TestBrowserBuy(t *testing.T) {
	t.Parallel() // waits more than it computes: overlaps the other waiting tests
	bin := findChromium()
	if bin == "" {
		t.Skip("no Chromium found (looked for chromium, chromium-browser, google-chrome; set CHROMIUM=path): browser test skipped")
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1000, 1100),
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelA()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	// Bounds only, generous for -race on a loaded machine: every wait below
	// ends as soon as the page shows what it waits for.
	ctx, cancelT := context.WithTimeout(ctx, 4*time.Minute)
	defer cancelT()

	// The first Run starts the browser on ctx: do it on ctx itself, not on a
	// per-step child whose cancel would close the browser. It comes before
	// the app, whose sale starts StartIn after it is seeded: a slow browser
	// start does not eat into the countdown.
	if _, err := chromedp.Run(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start chromium %s: %v", bin, err)
	}

	const stock = 5
	cfg := embeddedConfig(50, stock)
	cfg.StartIn = 15 * time.Second // the page shows the countdown first
	cfg.PathLead = 2 * time.Second
	a, direct := startApp(t, cfg)
	mini := app.Miniredis(a)
	if mini == nil {
		t.Fatal("the embedded config has no miniredis")
	}
	start := saleStart(t, direct)
	front := slowFront(t, direct, 3*time.Second, 10*time.Minute)

	step := func(what string, act chromedp.Action[chromedp.Void]) {
		t.Helper()
		sctx, sc := context.WithTimeout(ctx, time.Minute)
		defer sc()
		if _, err := chromedp.Run(sctx, act); err != nil {
			dctx, c := context.WithTimeout(ctx, 5*time.Second)
			defer c()
			m, _ := chromedp.Run(dctx, chromedp.Evaluate[string](`document.getElementById("message").textContent + " | " + document.body.innerText.slice(0, 400)`))
			if p := os.Getenv("FULLSTACK_SCREENSHOT"); p != "" {
				if png, err := chromedp.Run(dctx, chromedp.FullScreenshot(100)); err == nil {
					_ = os.WriteFile(p, png, 0o644)
				}
			}
			t.Fatalf("browser: %s: %v; page: %q", what, err, m)
		}
	}
	// until waits for a JavaScript condition on the page's state.
	until := func(what, cond string) {
		t.Helper()
		step(what, chromedp.Poll[chromedp.Void](cond, chromedp.WithPollingTimeout(time.Minute)))
	}
	eval := func(expr string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
		if err != nil {
			t.Fatalf("browser: %s: %v", expr, err)
		}
		return s
	}
	const (
		countdown   = `document.getElementById("countdown").textContent`
		message     = `document.getElementById("message").textContent`
		status      = `(document.getElementById("message").dataset.status || "")`
		captchaID   = `(document.getElementById("captcha-img").dataset.id || "")`
		buyEnabled  = `!document.getElementById("buy-btn").disabled`
		orderHidden = `document.getElementById("order").classList.contains("hidden")`
	)

	step("open page", chromedp.Steps(
		chromedp.Navigate(front),
		chromedp.WaitVisible(chromedp.CSS("#username")),
	))
	until("countdown shown", countdown+` !== "—"`)
	seen := eval(countdown)
	if time.Now().Before(start) {
		// The page's clock is never ahead of the server's: before the start
		// (on this process's clock, the server's) it must count down.
		if !strings.HasPrefix(seen, "starts in") {
			t.Errorf("countdown before the start = %q, want \"starts in …\"", seen)
		}
	} else {
		t.Logf("the page came up after the sale started (slow machine): countdown %q not checked", seen)
	}
	step("sign in", chromedp.Steps(
		chromedp.SetValue(chromedp.CSS("#username"), "user7"),
		chromedp.Click(chromedp.CSS("#login-btn")),
		chromedp.WaitVisible(chromedp.CSS("#buy-card")),
		chromedp.WaitVisible(chromedp.CSS(`#captcha-img[src^="data:image"]`)),
	))
	step("solve captcha via the demo hook", chromedp.Steps(
		chromedp.WaitVisible(chromedp.CSS("#demo-fill")),
		chromedp.Click(chromedp.CSS("#demo-fill")),
	))
	until("captcha answer filled", `document.getElementById("captcha").value.length > 0`)

	// The page opens the button when its clock says the sale is live.
	until("buy button enabled", buyEnabled)
	if now := time.Now(); now.Before(start) {
		t.Errorf("buy button enabled %v before the server's start (page clock ahead of the server's)", start.Sub(now))
	}
	if cd := eval(countdown); !strings.HasPrefix(cd, "ends in") {
		t.Errorf("countdown with the button enabled = %q, want \"ends in …\"", cd)
	}

	// A buy refused as not started all the same: Redis's clock (which the
	// reservation script reads) 30 s behind the start.
	firstCaptcha := eval(captchaID)
	mini.SetTime(start.Add(-30 * time.Second))
	step("buy while Redis's clock is behind", chromedp.Click(chromedp.CSS("#buy-btn")))
	until("refusal shown", status+` === "not_started"`)
	if msg := eval(message); !strings.Contains(msg, "not started") {
		t.Errorf("message for a buy before the start = %q", msg)
	}
	// Not stuck: a fresh captcha (the old one was spent), and the button
	// usable again once the page has re-read the server's clock.
	until("a fresh captcha", captchaID+` !== "" && `+captchaID+` !== `+strconv.Quote(firstCaptcha)+
		` && document.getElementById("captcha").value === ""`)
	until("buy button usable again", buyEnabled)
	if eval(orderHidden+` ? "hidden" : "shown"`) != "hidden" {
		t.Error("order shown after a refused buy")
	}
	ctxDB, cancelDB := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancelDB()
	iv, err := a.Invariants(ctxDB)
	if err != nil {
		t.Fatal(err)
	}
	if iv.RedisRemain != stock || iv.RedisLive != 0 || iv.LiveOrders != 0 {
		t.Errorf("after the refused buy: redis remaining %d, live reservations %d, live orders %d; want %d, 0, 0",
			iv.RedisRemain, iv.RedisLive, iv.LiveOrders, stock)
	}

	// Redis back on the real clock: the retry buys.
	mini.SetTime(time.Time{})
	step("solve the new captcha", chromedp.Click(chromedp.CSS("#demo-fill")))
	until("new captcha answer filled", `document.getElementById("captcha").value.length > 0`)
	step("buy", chromedp.Steps(
		chromedp.Click(chromedp.CSS("#buy-btn")),
		chromedp.WaitVisible(chromedp.CSS("#order")),
	))
	orderNo, msg, st := eval(`document.getElementById("order-no").textContent`), eval(message), eval(status)
	if !regexp.MustCompile(`^\S{6,}$`).MatchString(orderNo) {
		t.Errorf("order number %q", orderNo)
	}
	if st != "created" {
		t.Errorf("message status %q (%q), want created", st, msg)
	}
	// The order the page shows is the buyer's one order in the database.
	var rows []order.Order
	if err := a.Infra().DB.WithContext(ctxDB).Where("user_id = ? AND activity_id = ?", "7", strconv.FormatInt(cfg.ActivityID, 10)).Find(&rows).Error; err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].OrderNo != orderNo || rows[0].Status != order.OrderCreated {
		t.Errorf("orders of user7 in the DB: %+v, want one CREATED %s", rows, orderNo)
	}
	if iv, err = a.Invariants(ctxDB); err != nil {
		t.Fatal(err)
	}
	if iv.RedisRemain != stock-1 || iv.LiveOrders != 1 {
		t.Errorf("after the buy: redis remaining %d, live orders %d; want %d, 1", iv.RedisRemain, iv.LiveOrders, stock-1)
	}
	// The result came over the WebSocket (through the proxy in front).
	if n := app.Pushed(a, "ws"); n < 1 {
		t.Errorf("%v result messages pushed over WebSocket, want at least 1 (sse: %v)", n, app.Pushed(a, "sse"))
	}
	// Pay as a buyer does: the fake provider's signed callback pays the
	// order; the shop's refund (through the provider too) shows as
	// refunded on the page, which re-reads a paid order (#28).
	step("pay", chromedp.Click(chromedp.CSS("#pay-btn")))
	until("paid shown", status+` === "paid"`)
	if err := a.Infra().DB.WithContext(ctxDB).Where("order_no = ?", orderNo).Find(&rows).Error; err != nil || len(rows) != 1 || rows[0].Status != order.OrderPaid {
		t.Errorf("the order after the page's payment: %+v %v, want PAID", rows, err)
	}
	if err := a.Refund(ctxDB, orderNo, "sale"); err != nil {
		t.Fatalf("refund: %v", err)
	}
	until("refunded shown", status+` === "refunded"`)
	if p := os.Getenv("FULLSTACK_SCREENSHOT"); p != "" {
		if png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)); err == nil {
			_ = os.WriteFile(p, png, 0o644)
		}
	}
	t.Logf("order %s, message %q, then paid and refunded", orderNo, msg)
}
