package app_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/seckillkit/seckill/examples/fullstack/app"
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

// TestBrowserQueue: in queue mode the page joins the room, shows its
// position while admission is paused, then the moment of admission, and
// buys with the admission pass.
func TestBrowserQueue(t *testing.T) {
	_, step, until := fairBrowser(t)
	cfg := embeddedConfig(20, 5)
	cfg.SaleMode, cfg.QueueRate = app.SaleQueue, 50
	a, base := startApp(t, cfg)
	if err := app.PauseQueue(context.Background(), a, true); err != nil {
		t.Fatal(err)
	}
	pageSignIn(step, base, "user3")
	until("queue position shown", fairState+` === "waiting" && `+fairText+`.includes("number 1 in the queue")`)
	until("buy hidden while waiting", `!(`+buyVisible+`)`)
	if err := app.PauseQueue(context.Background(), a, false); err != nil {
		t.Fatal(err)
	}
	until("admission shown", fairState+` === "admitted" && `+fairText+`.includes("Admitted at")`)
	until("buy shown", buyVisible)
	pageBuy(step, until)
}

// TestBrowserDraw: in draw mode the page enters the draw before the
// start, shows the entry, then the outcome (the only entrant wins), and
// the winner buys.
func TestBrowserDraw(t *testing.T) {
	_, step, until := fairBrowser(t)
	cfg := embeddedConfig(20, 1)
	cfg.SaleMode, cfg.DrawDeadline = app.SaleDraw, time.Hour
	cfg.StartIn, cfg.PathLead = 8*time.Second, 8*time.Second
	_, base := startApp(t, cfg)
	pageSignIn(step, base, "user4")
	step("enter the draw", chromedp.Steps(
		chromedp.WaitVisible(chromedp.CSS("#draw-enter")),
		chromedp.Click(chromedp.CSS("#draw-enter")),
	))
	until("entry shown", fairState+` === "entered"`)
	until("outcome shown", fairState+` === "winner" && `+fairText+`.includes("You won the draw")`)
	until("buy shown", buyVisible)
	pageBuy(step, until)
}
