package load

import (
	"bytes"
	"encoding/xml"
	"io"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/html"

	"github.com/seckillkit/seckill/internal/testenv"
)

// syntheticReport is a 2 s buy phase of 3,000 answers: a burst of sales
// for the stock, then refusals; a pause between 0.8 s and 1.2 s (nothing
// answers) marked by events, as the later pause/top-up feature would.
func syntheticReport(violations ...string) *Report {
	rng := rand.New(rand.NewPCG(7, 11))
	started := testenv.Epoch()
	r := &Report{
		Users: 3000, BuyRequests: 3000, Started: started,
		PrepTime: 900 * ms, BuyTime: 2 * time.Second, DrainTime: 3 * time.Second, Throughput: 1500,
		Outcomes: map[string]int{}, PrepErrors: map[string]int{"token:sold_out": 12}, Final: map[string]int{},
		Config:     Config{Target: "http://127.0.0.1:8080", Users: 3000, FirstUser: 1, Repeat: 1, Concurrency: 64, Drain: time.Minute},
		Violations: violations,
	}
	for i := range 3000 {
		start := time.Duration(rng.Int64N(int64(1900 * ms)))
		if start >= 800*ms && start < 1200*ms {
			start += 400 * ms // the pause: nothing sent
		}
		lat := time.Duration(1+rng.Int64N(20)) * ms
		if start > 1500*ms {
			lat *= 4 // slower after the top-up
		}
		var out string
		switch {
		case i < 100:
			out = "queued"
		case i%50 == 0:
			out = "limited"
		case i%97 == 0:
			out = "busy"
		case i%211 == 0:
			out = "http_502"
		default:
			out = "sold_out"
		}
		r.Samples = append(r.Samples, Sample{Start: start, Latency: lat, Outcome: out, Stage: StageOf(out)})
		r.Outcomes[out]++
	}
	lat := make([]time.Duration, 0, len(r.Samples))
	for _, s := range r.Samples {
		lat = append(lat, s.Latency)
	}
	slices.Sort(lat)
	r.P50, r.P99, r.P999, r.Max = Percentile(lat, 0.5), Percentile(lat, 0.99), Percentile(lat, 0.999), lat[len(lat)-1]
	r.Accepted = r.Outcomes["queued"]
	r.Final["created"] = r.Accepted
	r.MarkAt("buy start", started)
	r.MarkAt("pause", started.Add(800*ms))
	r.MarkAt("top-up", started.Add(1200*ms))
	r.MarkAt("buy end", started.Add(2*time.Second))
	r.MarkAt("drain end", started.Add(5*time.Second)) // past the last answer: listed, not drawn
	r.resolveMarks()
	return r
}

func render(t *testing.T, r *Report) []byte {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, r.WriteHTML(&b))
	return b.Bytes()
}

// find returns the elements under n that match.
func find(n *html.Node, match func(*html.Node) bool) []*html.Node {
	var out []*html.Node
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && match(n) {
			out = append(out, n)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
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

func tag(name string) func(*html.Node) bool { return func(n *html.Node) bool { return n.Data == name } }

func byID(t *testing.T, doc *html.Node, id string) *html.Node {
	t.Helper()
	ns := find(doc, func(n *html.Node) bool { return attr(n, "id") == id })
	require.Len(t, ns, 1, "#%s", id)
	return ns[0]
}

func text(n *html.Node) string {
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return b.String()
}

func num(t *testing.T, s string) float64 {
	t.Helper()
	f, err := strconv.ParseFloat(s, 64)
	require.NoError(t, err, "%q", s)
	return f
}

func TestHTMLReportStructure(t *testing.T) {
	t.Parallel()
	r := syntheticReport()
	page := render(t, r)
	doc, err := html.Parse(bytes.NewReader(page))
	require.NoError(t, err)

	// Self-contained: no script, no stylesheet link, no image, nothing
	// fetched from anywhere.
	assert.Empty(t, find(doc, tag("script")))
	assert.Empty(t, find(doc, tag("link")))
	assert.Empty(t, find(doc, tag("img")))
	assert.Empty(t, find(doc, func(n *html.Node) bool { return attr(n, "src") != "" || attr(n, "href") != "" }))
	assert.NotContains(t, string(page), "url(")

	// What the charts must show, counted here from the samples: the bucket
	// width for a ~2 s run and the answers per (bucket, outcome).
	span := r.BuyTime
	for _, s := range r.Samples {
		span = max(span, s.End())
	}
	width := BucketWidth(span)
	require.Equal(t, 20*ms, width, "just under 2 s in at most 100 buckets")
	type cell struct {
		bucket  int
		outcome string
	}
	want := map[cell]int{}
	nonEmpty := map[int]bool{}
	for _, s := range r.Samples {
		b := int(s.End() / width)
		want[cell{b, s.Outcome}]++
		nonEmpty[b] = true
	}

	// Throughput: one <rect> per non-empty (bucket, outcome), its tooltip
	// naming the outcome and count, its fill the outcome's colour, the
	// columns stacked (each rect starts where the one below ends).
	tp := byID(t, doc, "throughput")
	assert.Equal(t, "svg", tp.Data)
	rects := find(find(tp, func(n *html.Node) bool { return attr(n, "class") == "data" })[0], tag("rect"))
	require.Len(t, rects, len(want))
	titleRE := regexp.MustCompile(`^(\d+\.\d{3}) s–\d+\.\d{3} s: (\S+) (\d+) \(\d+/s\)$`)
	got := map[cell]int{}
	top := map[string]float64{}    // x → top of the column so far
	fills := map[string][]string{} // outcome → fill of each of its rects
	for _, rc := range rects {
		m := titleRE.FindStringSubmatch(text(rc))
		require.NotNil(t, m, "rect title %q", text(rc))
		sec := num(t, m[1])
		b := int(sec*1000/20 + 0.5)
		n, _ := strconv.Atoi(m[3])
		got[cell{b, m[2]}] += n
		if c, ok := outcomeColors[m[2]]; ok {
			assert.Equal(t, c, attr(rc, "fill"), "fill of %s", m[2])
		}
		fills[m[2]] = append(fills[m[2]], attr(rc, "fill"))
		y, h := num(t, attr(rc, "y")), num(t, attr(rc, "height"))
		assert.Positive(t, h)
		x := attr(rc, "x")
		if prev, ok := top[x]; ok {
			assert.InDelta(t, prev, y+h, 0.11, "stacked at x=%s", x)
		} else {
			assert.InDelta(t, padT+plotH, y+h, 0.11, "the bottom rect sits on the axis")
		}
		top[x] = y
	}
	assert.Equal(t, want, got)
	seen := map[string]string{} // fill → outcome: one colour per outcome, none shared
	for o, fs := range fills {
		for _, f := range fs {
			assert.Equal(t, fs[0], f, "one colour for %s", o)
		}
		assert.NotContains(t, seen, fs[0], "%s and %s share a colour", o, seen[fs[0]])
		seen[fs[0]] = o
	}
	assert.Len(t, seen, len(r.Outcomes))
	// The tallest column is the busiest bucket, scaled to a 1-2-5 maximum.
	var busiest float64
	for b := range nonEmpty {
		n := 0
		for c, k := range want {
			if c.bucket == b {
				n += k
			}
		}
		busiest = max(busiest, float64(n)/width.Seconds())
	}
	minTop := padT + plotH
	for _, y := range top {
		minTop = min(minTop, y)
	}
	assert.InDelta(t, plotH*busiest/niceCeil(busiest), padT+plotH-minTop, 0.2)

	// Latency: p50, p90, p99 lines; the pause (no answer from ~0.82 s to
	// 1.2 s) cuts each into two, so 6 polylines with one point per
	// non-empty bucket in each series.
	lat := byID(t, doc, "latency")
	lines := find(lat, tag("polyline"))
	points := map[string]int{}
	for _, l := range lines {
		points[text(l)] += len(strings.Fields(attr(l, "points")))
	}
	assert.Len(t, lines, 6)
	assert.Equal(t, map[string]int{"p50": len(nonEmpty), "p90": len(nonEmpty), "p99": len(nonEmpty)}, points)

	// Events: the four inside the charts are drawn on both; the drain's
	// end is listed only.
	for _, id := range []string{"throughput", "latency"} {
		ev := find(byID(t, doc, id), func(n *html.Node) bool { return attr(n, "class") == "event-label" })
		var names []string
		for _, e := range ev {
			names = append(names, text(e))
		}
		assert.Equal(t, []string{"buy start", "pause", "top-up", "buy end"}, names, id)
	}
	evRows := find(byID(t, doc, "events"), tag("tr"))
	require.Len(t, evRows, 6) // header + 5
	assert.Contains(t, text(evRows[5]), "drain end")
	assert.Contains(t, text(evRows[5]), "5.000 s")
	assert.Contains(t, text(evRows[5]), "outside the charts")

	// Answers by stage: a bar and a table row per (stage, outcome), counts
	// as counted here.
	rows := find(byID(t, doc, "stage-table"), tag("tr"))[1:]
	byStage := ByStage(r.Samples)
	require.Len(t, rows, len(byStage))
	require.Len(t, find(byID(t, doc, "stages"), tag("rect")), len(byStage))
	total := 0
	for i, row := range rows {
		cells := find(row, tag("td"))
		require.Len(t, cells, 4)
		assert.Equal(t, StageOf(text(cells[1])), text(cells[0]))
		n, err := strconv.Atoi(text(cells[2]))
		require.NoError(t, err)
		assert.Equal(t, r.Outcomes[text(cells[1])], n, "row %d", i)
		total += n
	}
	assert.Equal(t, len(r.Samples), total)

	// The invariant verdict and the parameters.
	inv := byID(t, doc, "invariants")
	assert.Contains(t, attr(inv, "class"), "ok")
	assert.Contains(t, text(byID(t, doc, "params")), "http://127.0.0.1:8080")
	assert.Contains(t, text(byID(t, doc, "summary")), "p50")

	// Each SVG is well-formed XML on its own (an image viewer can take it).
	for _, m := range regexp.MustCompile(`(?s)<svg .*?</svg>`).FindAll(page, -1) {
		d := xml.NewDecoder(bytes.NewReader(m))
		for {
			_, err := d.Token()
			if err == io.EOF {
				break
			}
			require.NoError(t, err, "svg is not well-formed XML")
		}
	}
}

func TestHTMLReportViolations(t *testing.T) {
	t.Parallel()
	r := syntheticReport("I1 oversell: 11 sold > 10 stock", "I2 a user holds 2 units (cap 1) <b>")
	doc, err := html.Parse(bytes.NewReader(render(t, r)))
	require.NoError(t, err)
	inv := byID(t, doc, "invariants")
	assert.Contains(t, attr(inv, "class"), "bad")
	items := find(inv, tag("li"))
	require.Len(t, items, 2)
	assert.Equal(t, "I1 oversell: 11 sold > 10 stock", text(items[0]))
	assert.Equal(t, "I2 a user holds 2 units (cap 1) <b>", text(items[1]), "escaped, not markup")
	assert.Empty(t, find(inv, tag("b")))
}

func TestHTMLReportNoSamples(t *testing.T) {
	t.Parallel()
	doc, err := html.Parse(bytes.NewReader(render(t, &Report{})))
	require.NoError(t, err)
	for _, id := range []string{"throughput", "latency"} {
		svg := byID(t, doc, id)
		assert.Empty(t, find(svg, tag("polyline")))
		assert.Contains(t, text(svg), "no samples")
	}
	assert.Len(t, find(byID(t, doc, "stage-table"), tag("tr")), 1)
}
