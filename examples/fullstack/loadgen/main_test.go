package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/html"
	"gorm.io/gorm"

	"github.com/seckillkit/seckill/examples/fullstack/app"
	"github.com/seckillkit/seckill/examples/fullstack/history"
	"github.com/seckillkit/seckill/examples/fullstack/load"
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
	// Every accepted buyer's history was checked, against SQL too.
	hist := text(byID(t, doc, "histories"))
	assert.Contains(t, hist, strconv.Itoa(stock)+" reservation histories of ")
	assert.Contains(t, hist, "SSE streams")
	assert.Contains(t, hist, "last word against SQL")
	assert.Contains(t, hist, ": 0 violations")
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

// -peak: the stock is half the users unless it is given (flag or
// environment), and the bare server is measured beside the buy phase.
func TestPeakDefaults(t *testing.T) {
	embeddedOnly(t)
	cl := parseFlags([]string{"-peak", "-users", "2000"})
	assert.Equal(t, int64(1000), cl.cfg.Stock)
	assert.True(t, cl.baseline, "-peak measures the bare server")
	assert.True(t, cl.lc.Peak)

	cl = parseFlags([]string{"-peak"})
	assert.Equal(t, int64(cl.cfg.DemoUsers/2), cl.cfg.Stock, "the default users")
	cl = parseFlags([]string{"-peak", "-users", "1"})
	assert.Equal(t, int64(1), cl.cfg.Stock, "at least one unit")
	cl = parseFlags([]string{"-peak", "-users", "2000", "-stock", "7"})
	assert.Equal(t, int64(7), cl.cfg.Stock, "-stock wins")
	t.Setenv("SECKILL_STOCK", "9")
	cl = parseFlags([]string{"-peak", "-users", "2000"})
	assert.Equal(t, int64(9), cl.cfg.Stock, "SECKILL_STOCK wins")
	t.Setenv("SECKILL_STOCK", "")

	cl = parseFlags([]string{"-users", "2000"})
	assert.Equal(t, int64(100), cl.cfg.Stock, "without -peak: the service's default")
	assert.False(t, cl.baseline)
	assert.False(t, cl.lc.Peak)
}

// Without a real Redis the peak says why it has no Redis figures.
func TestRedisReaderWithoutRedis(t *testing.T) {
	embeddedOnly(t)
	cl := parseFlags(nil)
	read, note, closeAll := redisReader(cl.cfg, true)
	defer closeAll()
	assert.Nil(t, read)
	assert.Contains(t, note, "miniredis has no INFO commandstats")
	_, note, _ = redisReader(cl.cfg, false)
	assert.Contains(t, note, "the target's Redis is not known")
}

// TestPeakEmbedded runs -peak against the embedded server: half the users
// buy a unit, the figures are printed beside the bare server's, and Redis
// is read right before and right after the buy phase (a reader of the
// test's own: miniredis has no INFO commandstats), 300 EVALSHA between the
// two readings being 2 per accepted buy.
func TestPeakEmbedded(t *testing.T) {
	embeddedOnly(t)
	var reads int
	newRedisReader = func(app.Config, bool) (func(context.Context) (load.RedisReading, error), string, func()) {
		return func(context.Context) (load.RedisReading, error) {
			reads++
			return load.RedisReading{Calls: map[string]int64{"EVALSHA": int64(300 * (reads - 1)), "INFO": int64(reads)}, CPU: time.Duration(reads) * 15 * time.Millisecond}, nil
		}, "", func() {}
	}
	defer func() { newRedisReader = redisReader }()
	out := filepath.Join(t.TempDir(), "peak.html")
	printed, code, err := capture(func() (int, error) {
		return run([]string{"-q", "-peak", "-users", "300", "-c", "16", "-drain", "2m", "-report", out})
	})
	require.NoError(t, err, printed)
	require.Equal(t, 0, code, printed)
	assert.Equal(t, 2, reads)
	assert.Contains(t, printed, "vs 150 stock")
	assert.Contains(t, printed, "peak        150 units for 300 users (300 buy requests)")
	assert.Regexp(t, `contended: 150 accepted, 150 refused\s+300\s+\d+/s`, printed)
	assert.Regexp(t, `bare net/http right before\s+150\s+\d+/s`, printed)
	assert.Regexp(t, `ratio \d+\.\d\d× the bare server's rate`, printed)
	assert.Contains(t, printed, "EVALSHA 2.00 (2.00 in all; 300 commands for 150 accepted of 300 buy requests)")
	assert.Contains(t, printed, "redis cpu   100µs per accepted buy")
	page, err := os.ReadFile(out)
	require.NoError(t, err)
	doc, err := html.Parse(bytes.NewReader(page))
	require.NoError(t, err)
	assert.Contains(t, text(byID(t, doc, "redis-calls")), "EVALSHA 2.00")
	assert.Len(t, find(byID(t, doc, "peak"), func(n *html.Node) bool { return n.Data == "tr" }), 4)
}

// capture runs f with os.Stdout going to a pipe and returns what it printed.
func capture(f func() (int, error)) (string, int, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return "", 0, err
	}
	stdout := os.Stdout
	os.Stdout = w
	out := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(r)
		out <- string(b)
	}()
	code, ferr := f()
	os.Stdout = stdout
	_ = w.Close()
	return <-out, code, ferr
}

// TestHistoryViolationFailsTheRun: the buyers' histories are part of the
// run's invariants. With the stores' facts read from SQL doctored so that
// one sold reservation is an order of another user, the run reports a
// "not theirs" violation for it, prints it with the other invariants and
// exits 1; the real facts give 0 violations (TestReportFlag).
func TestHistoryViolationFailsTheRun(t *testing.T) {
	embeddedOnly(t)
	newTruth = func(db *gorm.DB) func(context.Context, string) (history.Truth, error) {
		read := truthOf(db)
		return func(ctx context.Context, activity string) (history.Truth, error) {
			truth, err := read(ctx, activity)
			if err != nil {
				return nil, err
			}
			ids := make([]string, 0, len(truth))
			for id := range truth {
				ids = append(ids, id)
			}
			slices.Sort(ids)
			require.NotEmpty(t, ids, "no order in SQL")
			f := truth[ids[0]]
			f.User += "0" // the order of someone else
			truth[ids[0]] = f
			return truth, nil
		}
	}
	t.Cleanup(func() { newTruth = truthOf })
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
	code, err := run([]string{"-q", "-users", "60", "-stock", "10", "-c", "8", "-drain", "2m"})
	_ = w.Close()
	os.Stdout = stdout
	printed := <-out
	require.NoError(t, err)
	assert.Equal(t, 1, code, "a history violation fails the run:\n%s", printed)
	assert.Contains(t, printed, "invariants  VIOLATED")
	assert.Contains(t, printed, "history not theirs: reservation")
	assert.Contains(t, printed, ": 1 violations")
}
