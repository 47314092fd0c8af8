package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/html"
)

// embeddedOnly clears the service's environment (SECKILL_REDIS_ADDR, ...)
// so the embedded server runs on miniredis, SQLite and kfake, whatever
// servers the environment names.
func embeddedOnly(t *testing.T) {
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "SECKILL_") && k != "SECKILL_TEST_EPOCH" {
			t.Setenv(k, "")
		}
	}
}

func find(n *html.Node, match func(*html.Node) bool) []*html.Node {
	var out []*html.Node
	if n.Type == html.ElementNode && match(n) {
		out = append(out, n)
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		out = append(out, find(c, match)...)
	}
	return out
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func text(n *html.Node) string {
	if n.Type == html.TextNode {
		return n.Data
	}
	var b strings.Builder
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		b.WriteString(text(c))
	}
	return b.String()
}

func byID(t *testing.T, doc *html.Node, id string) *html.Node {
	t.Helper()
	ns := find(doc, func(n *html.Node) bool { return attr(n, "id") == id })
	require.Len(t, ns, 1, "#%s", id)
	return ns[0]
}

// TestReportFlag runs the generator against the embedded server with
// -report and reads the page back: every buy request is in it once, the
// stock sold is what the server was given, the invariants hold.
func TestReportFlag(t *testing.T) {
	embeddedOnly(t)
	out := filepath.Join(t.TempDir(), "run.html")
	const users, stock = 300, 20
	code, err := run([]string{"-q", "-users", strconv.Itoa(users), "-stock", strconv.Itoa(stock), "-c", "16", "-drain", "2m", "-report", out})
	require.NoError(t, err)
	require.Equal(t, 0, code, "invariants violated")
	page, err := os.ReadFile(out)
	require.NoError(t, err)
	doc, err := html.Parse(bytes.NewReader(page))
	require.NoError(t, err)

	assert.Contains(t, attr(byID(t, doc, "invariants"), "class"), "ok")
	// The stage table counts each buy request once; "queued" = the stock.
	total, queued := 0, 0
	for _, row := range find(byID(t, doc, "stage-table"), func(n *html.Node) bool { return n.Data == "tr" })[1:] {
		cells := find(row, func(n *html.Node) bool { return n.Data == "td" })
		require.Len(t, cells, 4)
		n, err := strconv.Atoi(text(cells[2]))
		require.NoError(t, err)
		total += n
		if text(cells[1]) == "queued" {
			queued += n
		}
	}
	assert.Equal(t, users, total)
	assert.Equal(t, stock, queued)
	// So do the throughput bars (their tooltips carry the counts).
	bars := 0
	for _, r := range find(byID(t, doc, "throughput"), func(n *html.Node) bool { return n.Data == "rect" && attr(n, "fill") != "" && text(n) != "" }) {
		f := strings.Fields(text(r)) // "0.010 s–0.020 s: sold_out 12 (1200/s)"
		require.GreaterOrEqual(t, len(f), 3, "%q", text(r))
		n, err := strconv.Atoi(f[len(f)-2])
		require.NoError(t, err, "%q", text(r))
		bars += n
	}
	assert.Equal(t, users, bars)
	var events []string
	for _, e := range find(byID(t, doc, "throughput"), func(n *html.Node) bool { return attr(n, "class") == "event-label" }) {
		events = append(events, text(e))
	}
	assert.Equal(t, []string{"buy start", "buy end"}, events)
}

func TestWriteReportBadPath(t *testing.T) {
	embeddedOnly(t)
	err := writeReport(filepath.Join(t.TempDir(), "no-such-dir", "r.html"), nil)
	require.Error(t, err)
	assert.ErrorIs(t, err, os.ErrNotExist)
}

// TestBaselineBesideTheBuyPhase: -baseline measures the bare server in two
// halves of the buy phase's request count, right before and right after
// it, and prints the service's throughput and CPU ratios to both.
func TestBaselineBesideTheBuyPhase(t *testing.T) {
	embeddedOnly(t)
	const users = 300
	r, w, err := os.Pipe()
	require.NoError(t, err)
	stdout := os.Stdout
	os.Stdout = w
	defer func() { os.Stdout = stdout }()
	out := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(r)
		out <- string(b)
	}()
	code, err := run([]string{"-q", "-baseline", "-users", strconv.Itoa(users), "-repeat", "2", "-stock", "20", "-c", "16", "-drain", "2m"})
	os.Stdout = stdout
	require.NoError(t, w.Close())
	printed := <-out
	require.NoError(t, err, printed)
	require.Equal(t, 0, code, printed)
	assert.Contains(t, printed, "baseline    bare net/http right before the buy phase, same generator: 300 requests in ")
	assert.Contains(t, printed, "baseline    bare net/http right after the buy phase, same generator: 300 requests in ")
	assert.Regexp(t, `ratio       the service's buy phase ran at \d+% of the bare server's rate \(both halves\)`, printed)
	assert.Regexp(t, `cpu ratio   \d+\.\d\d: \(bare server \+ generator CPU per request\) / \(service \+ generator CPU per buy\)`, printed)
}
