package app_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/seckillkit/seckill/examples/fullstack/app"
	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/stock"
)

// TestBrowserBuyVariant drives the page of a sale in sizes in headless
// Chromium: each size shows its units left, a sold-out size is marked and
// cannot be picked, the buy button asks for a size until one is picked,
// and the order shown names the size bought — which is the order's line
// in the database and the unit gone from that size in Redis.
func TestBrowserBuyVariant(t *testing.T) {
	t.Parallel() // waits more than it computes: overlaps the other waiting tests
	bin := findChromium()
	if bin == "" {
		t.Skip("no Chromium found (looked for chromium, chromium-browser, google-chrome; set CHROMIUM=path): browser test skipped")
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck, chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1000, 1100),
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelA()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, 4*time.Minute) // a bound; every wait ends when the page shows it
	defer cancelT()
	if _, err := chromedp.Run(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start chromium %s: %v", bin, err)
	}

	cfg := embeddedConfig(20, 4)
	cfg.Variants = []stock.Variant{{ID: "36", Stock: 1}, {ID: "37", Stock: 3}}
	a, url := startApp(t, cfg)
	bg := context.Background()
	// Size 36 sold out before the page opens: another buyer holds its unit.
	if res, err := app.ReserveVariant(bg, a, "36", "19", "other-36"); err != nil || res.Status != stock.Reserved {
		t.Fatalf("reserve size 36: %v %v", res.Status, err)
	}
	t.Cleanup(func() { _ = app.ReleaseVariant(bg, a, "36", "other-36") })

	step := func(what string, act chromedp.Action[chromedp.Void]) {
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
	const size = `document.querySelector('[data-variant="%s"]')`
	s36, s37 := strings.Replace(size, "%s", "36", 1), strings.Replace(size, "%s", "37", 1)

	step("open page, sign in", chromedp.Steps(
		chromedp.Navigate(url),
		chromedp.WaitVisible(chromedp.CSS("#username")),
		chromedp.SetValue(chromedp.CSS("#username"), "user3"),
		chromedp.Click(chromedp.CSS("#login-btn")),
		chromedp.WaitVisible(chromedp.CSS(`#captcha-img[src^="data:image"]`)),
		chromedp.Click(chromedp.CSS("#demo-fill")),
	))
	until("sizes shown", s36+` !== null && `+s37+` !== null`)
	until("size 36 sold out, size 37 with 3 left", s36+`.disabled && `+s36+`.textContent.includes("sold out") && !`+s37+`.disabled && `+s37+`.textContent.includes("3 left")`)
	until("captcha answer filled", `document.getElementById("captcha").value.length > 0`)
	if got := eval(`document.getElementById("buy-btn").textContent + "|" + document.getElementById("buy-btn").disabled`); got != "Pick a size|true" {
		t.Errorf("buy button before a size is picked: %q, want disabled \"Pick a size\"", got)
	}
	step("pick size 37", chromedp.Click(chromedp.CSS(`[data-variant="37"]`)))
	until("size 37 picked", s37+`.getAttribute("aria-checked") === "true" && document.getElementById("chosen").textContent === "Size 37"`)
	until("buy button enabled", `!document.getElementById("buy-btn").disabled`)
	step("buy", chromedp.Steps(
		chromedp.Click(chromedp.CSS("#buy-btn")),
		chromedp.WaitVisible(chromedp.CSS("#order")),
	))
	orderNo := eval(`document.getElementById("order-no").textContent`)
	if got := eval(`document.getElementById("order-variant").textContent`); got != "size 37" {
		t.Errorf("the order's size on the page: %q, want \"size 37\"", got)
	}
	if st := eval(`document.getElementById("message").dataset.status || ""`); st != "created" {
		t.Errorf("message status %q, want created", st)
	}
	until("size 37 down to 2 left", s37+`.textContent.includes("2 left")`)

	// The page's order is user3's one order, its one line of size 37.
	tables, err := order.TablesOf()
	if err != nil {
		t.Fatal(err)
	}
	var lines []order.Line
	if err := app.DB(a).Table(tables.Line).Where("user_id = ?", "3").Find(&lines).Error; err != nil {
		t.Fatal(err)
	}
	if len(lines) != 1 || lines[0].OrderNo != orderNo || lines[0].ActivityID != app.ActivityID(a)+"/37" || lines[0].Qty != 1 {
		t.Errorf("order lines of user3: %+v, want one of %s/37 on order %s", lines, app.ActivityID(a), orderNo)
	}
	iv, err := a.Invariants(bg)
	if err != nil {
		t.Fatal(err)
	}
	if len(iv.Variants) != 2 || iv.Variants[1].LiveOrders != 1 || iv.Variants[1].RedisRemain != 2 || iv.Variants[1].DBStock != 2 || iv.Variants[0].RedisRemain != 0 {
		t.Errorf("counts after the buy: %+v", iv.Variants)
	}
}
