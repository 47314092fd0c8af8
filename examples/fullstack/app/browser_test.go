package app_test

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
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

// TestBrowserBuy drives the real page in headless Chromium: sign in, solve
// the captcha through the demo-only hook (the "demo: fill captcha" button,
// shown only with -demo), buy, and see the order number pushed back.
func TestBrowserBuy(t *testing.T) {
	bin := findChromium()
	if bin == "" {
		t.Skip("no Chromium found (looked for chromium, chromium-browser, google-chrome; set CHROMIUM=path): browser test skipped")
	}
	cfg := embeddedConfig(50, 5)
	cfg.StartIn = 8 * time.Second // the page shows the countdown first
	cfg.PathLead = 2 * time.Second
	a, url := startApp(t, cfg)
	_ = a

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
	ctx, cancelT := context.WithTimeout(ctx, 90*time.Second)
	defer cancelT()

	// The first Run starts the browser on ctx: do it on ctx itself, not on a
	// per-step child whose cancel would close the browser.
	if _, err := chromedp.Run(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start chromium %s: %v", bin, err)
	}
	step := func(what string, act chromedp.Action[chromedp.Void]) {
		t.Helper()
		sctx, sc := context.WithTimeout(ctx, 20*time.Second)
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
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("browser: text of %s: %v", sel, err)
		}
		return s
	}
	step("open page", chromedp.Steps(
		chromedp.Navigate(url),
		chromedp.WaitVisible(chromedp.CSS("#username")),
		chromedp.WaitVisible(chromedp.CSS("#countdown")),
		chromedp.Sleep(300*time.Millisecond),
	))
	countdown := text("#countdown")
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
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.getElementById("captcha").value.length > 0`, chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		t.Fatalf("captcha answer never filled: %v", err)
	}
	step("buy", chromedp.Steps(
		chromedp.WaitEnabled(chromedp.CSS("#buy-btn")), // enabled once the server clock says live
		chromedp.Click(chromedp.CSS("#buy-btn")),
		chromedp.WaitVisible(chromedp.CSS("#order")),
	))
	orderNo, msg := text("#order-no"), text("#message")
	attr, err := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.CSS("#message"), "data-status"))
	if err != nil {
		t.Fatal(err)
	}
	status := attr.Value
	if !strings.HasPrefix(countdown, "starts in") {
		t.Errorf("countdown before the start = %q, want \"starts in …\"", countdown)
	}
	if !regexp.MustCompile(`^\S{6,}$`).MatchString(orderNo) {
		t.Errorf("order number %q", orderNo)
	}
	if status != "created" {
		t.Errorf("message status %q (%q), want created", status, msg)
	}
	if p := os.Getenv("FULLSTACK_SCREENSHOT"); p != "" {
		if png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)); err == nil {
			_ = os.WriteFile(p, png, 0o644)
		}
	}
	t.Logf("order %s, message %q", orderNo, msg)
}
