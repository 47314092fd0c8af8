package load

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

//go:embed report.html.tmpl
var reportTmpl string

var reportTemplate = template.Must(template.New("report").Parse(reportTmpl))

// Chart geometry, in SVG user units.
const (
	chartW, chartH           = 960.0, 300.0
	padL, padR, padT, padB   = 70.0, 20.0, 28.0, 56.0
	plotW, plotH             = chartW - padL - padR, chartH - padT - padB
	stageBarH, stageBarGap   = 22.0, 6.0
	stageLabelW, stageChartW = 250.0, 960.0
	stageBarMaxW             = stageChartW - stageLabelW - 150
	maxEventsPerChart        = 12
)

// outcomeColors are the fixed colours of the outcomes the service gives;
// others take the fallback palette in order.
var outcomeColors = map[string]string{
	"queued":         "#2e7d32",
	"sold_out":       "#9e9e9e",
	"limited":        "#ef6c00",
	"captcha":        "#6a1b9a",
	"token":          "#1565c0",
	"already_bought": "#00838f",
	"denied":         "#c62828",
	"busy":           "#f9a825",
	"retry":          "#8d6e63",
	"not_started":    "#5c6bc0",
	"ended":          "#37474f",
	"failed":         "#ad1457",
}

var fallbackColors = []string{"#26a69a", "#d81b60", "#7cb342", "#3949ab", "#fb8c00", "#6d4c41", "#00acc1", "#8e24aa"}

// WriteHTML writes the report as one self-contained HTML page: inline SVG
// charts of the throughput by outcome and the latency percentiles over
// time (with the events as vertical lines), the answers by stage, the
// invariant check, and the run's parameters and figures. The page loads
// nothing from the network and runs no script.
func (r *Report) WriteHTML(w io.Writer) error {
	r.resolveMarks()
	v, err := r.view()
	if err != nil {
		return err
	}
	return reportTemplate.Execute(w, v)
}

type reportView struct {
	Title      string
	Generated  string
	OK         bool
	Violations []string
	Histories  string // the buyers' histories checked (histories's line)
	Params     [][2]string
	Summary    [][2]string
	Bucket     string
	Throughput chartView
	Latency    chartView
	Stages     stageView
	Events     []eventRow
	Peak       *peakView    // nil unless the run is the peak or measured the bare server
	Variants   []variantRow // a sale with variants: one row per size
}

// peakView is the page's "Peak" section: the buy phase beside the bare
// server, the ratios, and the Redis commands per accepted buy.
type peakView struct {
	Rows         []peakRow
	Ratio        string
	Until        string
	RedisCalls   string
	RedisCPU     string
	Units, Users int64
}

type chartView struct {
	ID, Title, YLabel string
	W, H              float64
	X0, Y0, X1, Y1    string // plot area
	TickY, LegendY    string // end of the x ticks; top of the legend's swatches
	LegendTextY       string
	Rects             []rectView
	Lines             []lineView
	XTicks, YTicks    []tickView
	Events            []markerView
	Legend            []legendView
	Empty             bool
}

type rectView struct{ X, Y, W, H, Fill, Title string }
type lineView struct{ Points, Stroke, Title string }
type tickView struct{ Pos, Label string }
type markerView struct{ X, LabelY, Label, Anchor, DX string }
type legendView struct{ X, Color, Label string }
type eventRow struct{ Name, At, Note string }

type stageView struct {
	W, H float64
	Bars []stageBar
	Rows []stageRow
}
type stageBar struct{ Y, TextY, LabelX, BarX, CountX, W, H, Fill, Label, Count string }
type stageRow struct {
	Stage, Outcome string
	N              int
	Share          string
}

func f1(x float64) string { return strconv.FormatFloat(x, 'f', 1, 64) }

// view is the page's data: the charts over the buy phase and every
// answer, the events, the run's parameters and its summary figures.
func (r *Report) view() (*reportView, error) {
	span := r.BuyTime // the charts cover the buy phase and every answer
	for _, s := range r.Samples {
		span = max(span, s.End())
	}
	width := BucketWidth(span)
	buckets, err := Buckets(r.Samples, width)
	if err != nil {
		return nil, err
	}
	v := &reportView{
		Variants:   r.variantRows(),
		Title:      "seckill load report",
		OK:         len(r.Violations) == 0,
		Violations: r.Violations,
		Histories:  r.historyLine(),
		Bucket:     width.String(),
	}
	if !r.Started.IsZero() {
		v.Generated = r.Started.UTC().Format(time.RFC3339)
	}
	outcomes := r.outcomeOrder()
	colors := colorsOf(outcomes)
	xmax := max(time.Duration(len(buckets))*width, (span+width-1)/width*width, width)
	v.Throughput = throughputChart(buckets, outcomes, colors, xmax, r.Events)
	v.Latency = latencyChart(buckets, xmax, r.Events)
	v.Stages = stageChart(ByStage(r.Samples), len(r.Samples), colors)
	v.Events = r.eventRows(xmax)
	v.Params = r.params(v.Generated, v.Bucket)
	v.Summary = r.summary()
	if r.Config.Peak || r.BareBefore != nil {
		v.Peak = r.peakView()
	}
	return v, nil
}

// peakView is the "Peak" section's data (PeakString's figures).
func (r *Report) peakView() *peakView {
	p := &peakView{Rows: r.peakRows(), Units: r.Server.Units(), Users: int64(r.Users), Ratio: "-", Until: "-"}
	if tp, cpu := r.Ratios(); tp > 0 {
		p.Ratio = fmt.Sprintf("%.2f× the bare server's rate", tp)
		if cpu > 0 {
			p.Ratio += fmt.Sprintf(", CPU ratio %.2f", cpu)
		}
	}
	if n, d := r.UntilSoldOut(); n > 0 && d > 0 {
		p.Until = fmt.Sprintf("%d requests in %v, %.0f/s", n, d.Round(time.Millisecond), float64(n)/d.Seconds())
	}
	p.RedisCalls, p.RedisCPU = r.RedisPerAccepted()
	return p
}

// colorsOf gives each outcome its fixed colour, or else the next of the
// fallback palette, in the order of outcomes.
func colorsOf(outcomes []string) map[string]string {
	colors := map[string]string{}
	next := 0
	for _, o := range outcomes {
		if c, ok := outcomeColors[o]; ok {
			colors[o] = c
		} else {
			colors[o] = fallbackColors[next%len(fallbackColors)]
			next++
		}
	}
	return colors
}

// eventRows lists the events for the table, noting those the charts (0 to
// xmax) do not show.
func (r *Report) eventRows(xmax time.Duration) []eventRow {
	var rows []eventRow
	for _, e := range r.Events {
		row := eventRow{Name: e.Name, At: fmtOffset(e.At)}
		if e.At < 0 || e.At > xmax {
			row.Note = "outside the charts"
		}
		rows = append(rows, row)
	}
	return rows
}

// params lists the run's parameters; started and bucket are the page's
// formatted start of the buy phase and bucket width.
func (r *Report) params(started, bucket string) [][2]string {
	c := r.Config
	return [][2]string{
		{"target", orDash(c.Target)},
		{"users", fmt.Sprintf("%d (user%d … user%d)", c.Users, c.FirstUser, c.FirstUser+c.Users-1)},
		{"buy requests per user", strconv.Itoa(c.Repeat)},
		{"concurrency", strconv.Itoa(c.Concurrency)},
		{"drain bound", c.Drain.String()},
		{"server in this process", strconv.FormatBool(r.SameProcess)},
		{"buy phase started", orDash(started)},
		{"bucket width", bucket},
	}
}

// summary lists the run's figures: times, throughput, latency, answers,
// CPU (when measured) and the server's counts.
func (r *Report) summary() [][2]string {
	sum := [][2]string{
		{"buy requests", strconv.Itoa(r.BuyRequests)},
		{"prepare / buy / drain", fmt.Sprintf("%v / %v / %v", r.PrepTime.Round(time.Millisecond), r.BuyTime.Round(time.Millisecond), r.DrainTime.Round(time.Millisecond))},
		{"throughput", fmt.Sprintf("%.0f buy requests/s", r.Throughput)},
		{"latency", fmt.Sprintf("p50 %v, p99 %v, p999 %v, max %v", r.P50, r.P99, r.P999, r.Max)},
		{"outcomes", fmtMap(r.Outcomes)},
		{"accepted → final", fmt.Sprintf("%d → %s", r.Accepted, fmtMap(r.Final))},
	}
	if len(r.PrepErrors) > 0 {
		sum = append(sum, [2]string{"prepare refusals", fmtMap(r.PrepErrors)})
	}
	if r.GenCPU > 0 {
		sum = append(sum, [2]string{"cpu", r.cpuPerBuy()})
	}
	s := r.Server
	return append(sum,
		[2]string{"server stock / sold", fmt.Sprintf("%d / %d (initial %d %+d adjusted; db stock %d, redis remaining %d)", s.Units(), s.Sold(), s.Initial, s.Adjusted, s.DBStock, s.RedisRemain)},
		[2]string{"server orders", fmt.Sprintf("%s; distinct buyers %d, outbox pending %d, settled %t", fmtMap(s.Orders), s.DistinctUsers, s.OutboxPending, s.Settled)},
	)
}

// cpuPerBuy is the summary's CPU per buy request: of the one process when
// the server runs in it, else of the generator, and of the server when
// its /metrics told.
func (r *Report) cpuPerBuy() string {
	n := time.Duration(max(r.BuyRequests, 1))
	cpu := fmt.Sprintf("generator %v per buy", (r.GenCPU / n).Round(100*time.Nanosecond))
	if r.SameProcess {
		cpu = fmt.Sprintf("%v per buy (generator + embedded server, one process)", (r.GenCPU / n).Round(100*time.Nanosecond))
	} else if r.ServerCPU > 0 {
		cpu = fmt.Sprintf("server %v per buy, %s", (r.ServerCPU / n).Round(100*time.Nanosecond), cpu)
	}
	return cpu
}

// outcomeOrder lists the outcomes seen: queued first, then by count
// (largest first), then by name.
func (r *Report) outcomeOrder() []string {
	count := map[string]int{}
	for _, s := range r.Samples {
		count[s.Outcome]++
	}
	out := make([]string, 0, len(count))
	for o := range count {
		out = append(out, o)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if (a == "queued") != (b == "queued") {
			return a == "queued"
		}
		if count[a] != count[b] {
			return count[a] > count[b]
		}
		return a < b
	})
	return out
}

func newChart(id, title, ylabel string) chartView {
	return chartView{ID: id, Title: title, YLabel: ylabel, W: chartW, H: chartH,
		X0: f1(padL), Y0: f1(padT), X1: f1(padL + plotW), Y1: f1(padT + plotH),
		TickY: f1(padT + plotH + 5), LegendY: f1(chartH - 12), LegendTextY: f1(chartH - 3)}
}

// axes sets the ticks of both axes and the event markers.
func (c *chartView) axes(xmax time.Duration, ymax float64, ylabel func(float64) string, events []Event) {
	for _, t := range niceTicks(xmax.Seconds()) {
		c.XTicks = append(c.XTicks, tickView{Pos: f1(padL + plotW*t/xmax.Seconds()), Label: strconv.FormatFloat(t, 'f', -1, 64) + " s"})
	}
	for _, t := range niceTicks(ymax) {
		c.YTicks = append(c.YTicks, tickView{Pos: f1(padT + plotH - plotH*t/ymax), Label: ylabel(t)})
	}
	for i, e := range events {
		if e.At < 0 || e.At > xmax || len(c.Events) >= maxEventsPerChart {
			continue
		}
		x := padL + plotW*e.At.Seconds()/xmax.Seconds()
		// Labels staggered on three rows: close events stay legible.
		m := markerView{X: f1(x), LabelY: f1(padT + 12 + float64(i%3)*12), Label: e.Name, Anchor: "start", DX: "3"}
		if x > padL+plotW*0.85 {
			// Near the right edge: the label goes left of the line.
			m.Anchor, m.DX = "end", "-3"
		}
		c.Events = append(c.Events, m)
	}
}

func throughputChart(buckets []Bucket, outcomes []string, colors map[string]string, xmax time.Duration, events []Event) chartView {
	c := newChart("throughput", "Throughput by outcome (answers per second, stacked)", "answers/s")
	var ymax float64
	for _, b := range buckets {
		ymax = max(ymax, b.Rate(""))
	}
	c.Empty = len(buckets) == 0
	ymax = niceCeil(ymax)
	sx := plotW / xmax.Seconds()
	for _, b := range buckets {
		x := padL + b.Start.Seconds()*sx
		w := max(b.Width.Seconds()*sx-1, 0.5)
		base := 0.0
		for _, o := range outcomes {
			rate := b.Rate(o)
			if rate == 0 {
				continue
			}
			y0 := padT + plotH - plotH*base/ymax
			y1 := padT + plotH - plotH*(base+rate)/ymax
			c.Rects = append(c.Rects, rectView{X: f1(x), Y: f1(y1), W: f1(w), H: f1(y0 - y1), Fill: colors[o],
				Title: fmt.Sprintf("%s–%s: %s %d (%.0f/s)", fmtOffset(b.Start), fmtOffset(b.Start+b.Width), o, b.Outcomes[o], rate)})
			base += rate
		}
	}
	c.axes(xmax, ymax, func(f float64) string { return fmtCount(f) + "/s" }, events)
	c.legend(outcomes, colors)
	return c
}

func latencyChart(buckets []Bucket, xmax time.Duration, events []Event) chartView {
	c := newChart("latency", "Latency percentiles of the answers in each bucket", "latency")
	var ymax time.Duration
	for _, b := range buckets {
		ymax = max(ymax, b.P99)
	}
	c.Empty = len(buckets) == 0
	ymaxMs := niceCeil(float64(ymax) / float64(time.Millisecond))
	sx := plotW / xmax.Seconds()
	series := []struct {
		name, color string
		get         func(Bucket) time.Duration
	}{
		{"p50", "#1565c0", func(b Bucket) time.Duration { return b.P50 }},
		{"p90", "#ef6c00", func(b Bucket) time.Duration { return b.P90 }},
		{"p99", "#c62828", func(b Bucket) time.Duration { return b.P99 }},
	}
	for _, s := range series {
		var pts []string
		flush := func() {
			if len(pts) > 0 {
				c.Lines = append(c.Lines, lineView{Points: strings.Join(pts, " "), Stroke: s.color, Title: s.name})
			}
			pts = nil
		}
		for _, b := range buckets {
			if b.N == 0 { // no answer: a gap in the line
				flush()
				continue
			}
			ms := float64(s.get(b)) / float64(time.Millisecond)
			x := padL + (b.Start.Seconds()+b.Width.Seconds()/2)*sx
			pts = append(pts, f1(x)+","+f1(padT+plotH-plotH*ms/ymaxMs))
		}
		flush()
	}
	c.axes(xmax, ymaxMs, func(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) + " ms" }, events)
	c.legend([]string{"p50", "p90", "p99"}, map[string]string{"p50": "#1565c0", "p90": "#ef6c00", "p99": "#c62828"})
	return c
}

func (c *chartView) legend(names []string, colors map[string]string) {
	x := padL
	for _, n := range names {
		c.Legend = append(c.Legend, legendView{X: f1(x), Color: colors[n], Label: n})
		x += 24 + 7*float64(len(n)) + 16
	}
}

func stageChart(rows []StageCount, total int, colors map[string]string) stageView {
	v := stageView{W: stageChartW, H: float64(len(rows))*(stageBarH+stageBarGap) + stageBarGap}
	top := 0
	if len(rows) > 0 {
		top = rows[0].N
	}
	for i, r := range rows {
		y := stageBarGap + float64(i)*(stageBarH+stageBarGap)
		w := max(stageBarMaxW*float64(r.N)/float64(top), 1)
		share := 100 * float64(r.N) / float64(max(total, 1))
		v.Bars = append(v.Bars, stageBar{
			Y: f1(y), TextY: f1(y + stageBarH*0.7), LabelX: f1(stageLabelW - 8), BarX: f1(stageLabelW), CountX: f1(stageLabelW + w + 6),
			W: f1(w), H: f1(stageBarH), Fill: colors[r.Outcome],
			Label: r.Stage + " · " + r.Outcome, Count: fmt.Sprintf("%d (%.1f%%)", r.N, share),
		})
		v.Rows = append(v.Rows, stageRow{Stage: r.Stage, Outcome: r.Outcome, N: r.N, Share: fmt.Sprintf("%.1f%%", share)})
	}
	return v
}

// niceCeil rounds x up to 1, 2 or 5 times a power of ten (1 for x ≤ 0).
func niceCeil(x float64) float64 {
	if x <= 0 || math.IsNaN(x) || math.IsInf(x, 0) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 5, 10} {
		if x <= m*p*(1+1e-9) {
			return m * p
		}
	}
	return 10 * p
}

// niceTicks returns 0 and the multiples of a 1-2-5 step up to max, four to
// ten of them.
func niceTicks(max float64) []float64 {
	if max <= 0 {
		return []float64{0}
	}
	step := niceCeil(max / 8)
	var out []float64
	for i := 0; ; i++ {
		t := float64(i) * step
		if t > max*(1+1e-9) {
			break
		}
		out = append(out, math.Round(t*1e6)/1e6) // 3×0.2 is 0.6, not 0.6000000000000001
	}
	return out
}

func fmtCount(f float64) string {
	switch {
	case f >= 1e6:
		return strconv.FormatFloat(f/1e6, 'f', -1, 64) + "M"
	case f >= 1e3:
		return strconv.FormatFloat(f/1e3, 'f', -1, 64) + "k"
	}
	return strconv.FormatFloat(f, 'f', -1, 64)
}

func fmtOffset(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', 3, 64) + " s"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
