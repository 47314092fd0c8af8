package load

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"image/png"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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

// TestHTMLReportInChromium opens the report from disk in headless Chromium,
// checks that the charts are laid out and painted and that the page asked
// the network for nothing, and keeps a screenshot: report.png in the test's
// temp dir (logged), and at $LOAD_REPORT_PNG when set.
func TestHTMLReportInChromium(t *testing.T) {
	bin := findChromium()
	if bin == "" {
		t.Skip("no Chromium found (looked for chromium, chromium-browser, google-chrome; set CHROMIUM=path): screenshot test skipped")
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "report.html")
	r := syntheticReport("I3 orders 99 (live 99 + cancelled 0) != accepted 100 - released 0")
	require.NoError(t, os.WriteFile(file, render(t, r), 0o644))
	pageURL := (&url.URL{Scheme: "file", Path: file}).String()

	var mu sync.Mutex
	var requests []string
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1100, 900),
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelA()
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithListener(func(ev any) {
		if e, ok := ev.(*network.EventRequestWillBeSent); ok {
			mu.Lock()
			requests = append(requests, e.Request.URL)
			mu.Unlock()
		}
	}))
	defer cancel()
	// The first Run starts the browser on ctx itself (see chromedp.Run);
	// the bound below is for the steps only, generous for -race on a
	// loaded machine: each step ends as soon as the browser answers.
	if _, err := chromedp.Run(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start chromium %s: %v", bin, err)
	}
	sctx, cancelS := context.WithTimeout(ctx, 2*time.Minute)
	defer cancelS()
	if err := chromedp.Do(sctx, chromedp.Navigate(pageURL), chromedp.WaitVisible(chromedp.CSS("#stages"))); err != nil {
		t.Fatalf("open %s: %v", pageURL, err)
	}

	// Laid out: every chart has a size, the bars and lines too.
	type box struct{ W, H float64 }
	boxes, err := chromedp.Run(sctx, chromedp.Evaluate[map[string]box](`(() => {
  const size = q => { let w = 0, h = 0; for (const e of document.querySelectorAll(q)) { const r = e.getBoundingClientRect(); w = Math.max(w, r.width); h = Math.max(h, r.height); } return {W: w, H: h}; };
  return {
    throughput: size("#throughput"), latency: size("#latency"), stages: size("#stages"),
    tallestBar: size("#throughput g.data rect"), line: size("#latency polyline"), stageBar: size("#stages rect"),
    verdict: size("#invariants li"),
  };
})()`))
	require.NoError(t, err)
	for name, b := range boxes {
		assert.Positive(t, b.W, "%s width", name)
		assert.Positive(t, b.H, "%s height", name)
	}
	nRects, err := chromedp.Run(sctx, chromedp.Evaluate[int](`document.querySelectorAll("#throughput g.data rect").length`))
	require.NoError(t, err)
	assert.Positive(t, nRects)
	// Nothing fetched: the page is the only request, and the browser's own
	// resource timing lists no subresource.
	resources, err := chromedp.Run(sctx, chromedp.Evaluate[int](`performance.getEntriesByType("resource").length`))
	require.NoError(t, err)
	assert.Zero(t, resources, "subresources loaded")
	mu.Lock()
	var fetched []string
	sawPage := false
	for _, u := range requests {
		switch u {
		case pageURL:
			sawPage = true
		case "about:blank":
		default:
			fetched = append(fetched, u)
		}
	}
	mu.Unlock()
	assert.True(t, sawPage, "the listener saw the page's own request (it works): %q", requests)
	assert.Empty(t, fetched, "the report made requests")

	shot, err := chromedp.Run(sctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	out := filepath.Join(dir, "report.png")
	require.NoError(t, os.WriteFile(out, shot, 0o644))
	t.Logf("screenshot: %s", out)
	if p := os.Getenv("LOAD_REPORT_PNG"); p != "" {
		require.NoError(t, os.WriteFile(p, shot, 0o644))
		t.Logf("screenshot copied to %s", p)
	}

	// Painted: the screenshot holds the colours of the queued and sold_out
	// bars and of the failed-invariant box.
	img, err := png.Decode(bytes.NewReader(shot))
	require.NoError(t, err)
	assert.GreaterOrEqual(t, img.Bounds().Dx(), 960)
	for name, hex := range map[string]string{"queued": outcomeColors["queued"], "sold_out": outcomeColors["sold_out"], "violation box": "#ffebee"} {
		assert.Positive(t, countColour(img, hex), "no %s pixel (%s) in the screenshot", name, hex)
	}
}

// countColour counts the pixels of img with the colour #rrggbb.
func countColour(img image.Image, hex string) int {
	var want color.RGBA
	for i, p := range []*uint8{&want.R, &want.G, &want.B} {
		v := 0
		for _, c := range hex[1+2*i : 3+2*i] {
			v *= 16
			switch {
			case c >= '0' && c <= '9':
				v += int(c - '0')
			default:
				v += int(c-'a') + 10
			}
		}
		*p = uint8(v)
	}
	n := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if uint8(r>>8) == want.R && uint8(g>>8) == want.G && uint8(bl>>8) == want.B {
				n++
			}
		}
	}
	return n
}
