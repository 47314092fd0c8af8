package app_test

import (
	"context"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	neturl "net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/seckillkit/seckill/examples/fullstack/app"
	"github.com/seckillkit/seckill/waitroom"
)

// fairBrowser starts headless Chromium (skips without one) and returns a
// step runner and a JavaScript-condition waiter on it.
func fairBrowser(t *testing.T) (ctx context.Context, step func(string, chromedp.Action[chromedp.Void]), until func(string, string)) {
	bin := findChromium()
	if bin == "" {
		t.Skip("no Chromium found (looked for chromium, chromium-browser, google-chrome; set CHROMIUM=path): browser test skipped")
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), chromedp.ExecPath(bin), chromedp.Headless, chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck, chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(1000, 1100))
	t.Cleanup(cancelA)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	ctx, cancelT := context.WithTimeout(ctx, 3*time.Minute) // a bound only
	t.Cleanup(cancelT)
	if _, err := chromedp.Run(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start chromium %s: %v", bin, err)
	}
	step = func(what string, act chromedp.Action[chromedp.Void]) {
		t.Helper()
		sctx, sc := context.WithTimeout(ctx, time.Minute)
		defer sc()
		if _, err := chromedp.Run(sctx, act); err != nil {
			dctx, c := context.WithTimeout(ctx, 5*time.Second)
			defer c()
			m, _ := chromedp.Run(dctx, chromedp.Evaluate[string](`document.body.innerText.slice(0, 600)`))
			if p := os.Getenv("FULLSTACK_SCREENSHOT"); p != "" {
				if png, err := chromedp.Run(dctx, chromedp.FullScreenshot(100)); err == nil {
					_ = os.WriteFile(p, png, 0o644)
				}
			}
			t.Fatalf("browser: %s: %v; page: %q", what, err, m)
		}
	}
	until = func(what, cond string) {
		t.Helper()
		step(what, chromedp.Poll[chromedp.Void](cond, chromedp.WithPollingTimeout(time.Minute)))
	}
	return ctx, step, until
}

const (
	fairState   = `(document.getElementById("fair-status").dataset.state || "")`
	fairText    = `document.getElementById("fair-status").textContent`
	fairVia     = `(document.getElementById("fair-status").dataset.via || "")`
	buyVisible  = `!document.getElementById("buy-btn").classList.contains("hidden")`
	buyStatus   = `(document.getElementById("message").dataset.status || "")`
	fillCaptcha = `document.getElementById("captcha").value.length > 0`
)

// signInAndBuy signs user in on the page at base, and, once until(ready)
// holds, fills the captcha and buys; it waits for the order.
func pageSignIn(step func(string, chromedp.Action[chromedp.Void]), base, user string) {
	step("open and sign in", chromedp.Steps(
		chromedp.Navigate(base),
		chromedp.WaitVisible(chromedp.CSS("#username")),
		chromedp.SetValue(chromedp.CSS("#username"), user),
		chromedp.Click(chromedp.CSS("#login-btn")),
		chromedp.WaitVisible(chromedp.CSS("#fair-card")),
	))
}

func pageBuy(step func(string, chromedp.Action[chromedp.Void]), until func(string, string)) {
	step("fill the captcha", chromedp.Click(chromedp.CSS("#demo-fill")))
	until("captcha filled", fillCaptcha)
	until("buy enabled", `!document.getElementById("buy-btn").disabled`)
	step("buy", chromedp.Click(chromedp.CSS("#buy-btn")))
	until("order created", buyStatus+` === "created"`)
}

// holdFirst serves base through a reverse proxy (WebSocket and SSE
// included) that holds the first request for path, and any other for path
// that comes while it is held, until release is called; it returns the
// proxy's URL.
func holdFirst(t *testing.T, base, path string) (url string, release func()) {
	target, err := neturl.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	hold := make(chan struct{})
	var once, first sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == path {
			first.Do(func() {
				select {
				case <-hold:
				case <-r.Context().Done():
				}
			})
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	release = func() { once.Do(func() { close(hold) }) }
	t.Cleanup(release)
	return srv.URL, release
}

// TestBrowserQueue: in queue mode the page joins the room, shows its
// position while admission is paused — pushed, once its stream is open
// (the page stops polling then) — then the moment of admission, pushed,
// and buys with the admission pass.
//
// The page's first poll is sent before its stream opens; the proxy holds
// it until the stream's first message is shown and lets it answer after:
// the page drops that older answer (data-stale) and still says "push".
// Before, the late poll answer took the page back to "poll", and with the
// queue paused no pushed change came to undo it (the project's CI met this
// order under load: "queue position pushed" timed out).
func TestBrowserQueue(t *testing.T) {
	t.Parallel() // waits more than it computes: overlaps the other waiting tests
	ctx, step, until := fairBrowser(t)
	cfg := embeddedConfig(20, 5)
	cfg.SaleMode, cfg.QueueRate = app.SaleQueue, 50
	a, base := startApp(t, cfg)
	if err := app.PauseQueue(context.Background(), a, true); err != nil {
		t.Fatal(err)
	}
	page, release := holdFirst(t, base, "/api/queue/poll")
	pageSignIn(step, page, "user3")
	pushedFirst := fairState + ` === "waiting" && ` + fairText + `.includes("number 1 in the queue") && ` + fairVia + ` === "push"`
	until("queue position pushed", pushedFirst)
	release()
	// The held answer has arrived once it was dropped, or shown.
	until("the older poll answer arrived", `(document.getElementById("fair-status").dataset.stale || "") !== "" || `+fairVia+` === "poll"`)
	if kept, err := chromedp.Run(ctx, chromedp.Evaluate[bool](pushedFirst)); err != nil || !kept {
		via, _ := chromedp.Run(ctx, chromedp.Evaluate[string](fairVia))
		t.Fatalf("after the older poll answer the page says via %q (err %v), want the pushed view kept", via, err)
	}
	until("buy hidden while waiting", `!(`+buyVisible+`)`)
	if err := app.PauseQueue(context.Background(), a, false); err != nil {
		t.Fatal(err)
	}
	until("admission pushed", fairState+` === "admitted" && `+fairText+`.includes("Admitted at") && `+fairVia+` === "push"`)
	until("buy shown", buyVisible)
	pageBuy(step, until)
}

// TestBrowserDraw: in draw mode two pages (two tabs, two buyers) enter
// the draw before the start and show the entry, then the outcome pushed
// through their streams: with stock 1 and the operator's seed (committed
// through the admin API, chosen so user5 wins, and revealed once both
// entries are shown), user5's page
// shows the win, user4's the waitlist. user5 buys and pays on the page:
// nobody can be replaced any more, and user4's page is pushed a final
// "lost".
func TestBrowserDraw(t *testing.T) {
	t.Parallel() // waits more than it computes: overlaps the other waiting tests
	ctx, step, until := fairBrowser(t)
	cfg := embeddedConfig(20, 1)
	cfg.SaleMode, cfg.DrawDeadline = app.SaleDraw, time.Hour
	cfg.StartIn, cfg.PathLead = 8*time.Second, 8*time.Second
	cfg.AdminAddr, cfg.AdminToken = "127.0.0.1:0", strings.Repeat("a", 40)
	a, base := startApp(t, cfg)
	var seed []byte
	for i := 0; seed == nil; i++ {
		s := []byte(strings.Repeat("x", 31) + strconv.Itoa(i))
		if waitroom.Shuffle(s, []string{"4", "5"})[0] == "5" {
			seed = s
		}
	}
	admin := func(path, body string) {
		t.Helper()
		req, _ := http.NewRequest("POST", a.AdminURL()+app.AdminPath+"queue/1/"+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+cfg.AdminToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("admin %s: %v %v", path, resp, err)
		}
		resp.Body.Close()
	}
	admin("commit", `{"commitment":"`+waitroom.Commit(seed)+`"}`)
	// user5 in a second tab (its own sessionStorage).
	tab, cancel := chromedp.NewContext(ctx)
	defer cancel()
	if _, err := chromedp.Run(tab, chromedp.Navigate("about:blank")); err != nil { // the tab lives as long as tab
		t.Fatal(err)
	}
	run := func(what string, act chromedp.Action[chromedp.Void]) {
		t.Helper()
		sctx, sc := context.WithTimeout(tab, time.Minute)
		defer sc()
		if _, err := chromedp.Run(sctx, act); err != nil {
			dctx, c := context.WithTimeout(tab, 5*time.Second)
			defer c()
			m, _ := chromedp.Run(dctx, chromedp.Evaluate[string](`document.body.innerText.slice(0, 600)`))
			t.Fatalf("browser (user5): %s: %v; page: %q", what, err, m)
		}
	}
	until5 := func(what, cond string) {
		t.Helper()
		run(what, chromedp.Poll[chromedp.Void](cond, chromedp.WithPollingTimeout(time.Minute)))
	}
	enter := chromedp.Steps(chromedp.WaitVisible(chromedp.CSS("#draw-enter")), chromedp.Click(chromedp.CSS("#draw-enter")))
	pageSignIn(run, base, "user5")
	run("enter the draw", enter)
	pageSignIn(step, base, "user4")
	step("enter the draw", enter)
	until("entry shown", fairState+` === "entered"`)
	until("entry pushed", fairState+` === "entered" && `+fairVia+` === "push"`)
	until5("entry shown", fairState+` === "entered"`)
	// The seed revealed once both entries are seen (the draw waits for it,
	// whenever the start passes: no race with a slow machine).
	admin("start", `{"seed":"`+hex.EncodeToString(seed)+`"}`)
	until5("win pushed", fairState+` === "winner" && `+fairText+`.includes("You won the draw") && `+fairVia+` === "push"`)
	until("waitlist pushed", fairState+` === "waitlisted" && `+fairText+`.includes("waitlist (#1)") && `+fairVia+` === "push"`)
	until("buy hidden", `!(`+buyVisible+`)`)
	until5("buy shown", buyVisible)
	pageBuy(run, until5)
	run("pay", chromedp.Click(chromedp.CSS("#pay-btn")))
	until5("paid", buyStatus+` === "paid"`)
	until("final lost pushed", fairState+` === "lost" && `+fairText+`.includes("Not drawn") && `+fairVia+` === "push"`)
}
