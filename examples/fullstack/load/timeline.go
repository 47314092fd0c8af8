package load

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"
)

// ErrBadBucket: a bucket width that is not positive.
var ErrBadBucket = errors.New("load: bucket width must be positive")

// Sample is one buy attempt as the generator saw it.
type Sample struct {
	Start   time.Duration // when the request was sent, from the start of the buy phase
	Latency time.Duration // until its answer was read
	Outcome string        // "queued", or the refusal's status (sold_out, limited, ...), or http_NNN
	Stage   string        // the stage of the chain that answered (see StageOf)
}

// End is when the answer arrived, from the start of the buy phase.
func (s Sample) End() time.Duration { return s.Start + s.Latency }

// Event is a named instant of a run (the buy phase's start and end, a
// pause, a stock top-up, ...), drawn as a vertical line in the HTML report.
type Event struct {
	Name string
	At   time.Duration // from the start of the buy phase; may be negative
}

// Mark records a named event now. See MarkAt.
func (r *Report) Mark(name string) { r.MarkAt(name, time.Now()) }

// MarkAt records a named event at t. It is safe to call from other
// goroutines while Run works (Config.OnReport hands the report over before
// the buy phase); the mark joins Events, as an offset from Started
// (negative for an instant before the buy phase), when Run returns or,
// for a mark made later, when WriteHTML runs.
func (r *Report) MarkAt(name string, t time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.marks = append(r.marks, mark{name, t})
}

type mark struct {
	name string
	at   time.Time
}

// resolveMarks moves the marks into Events, relative to r.Started, and
// sorts Events by time. Run calls it at its end, WriteHTML again (for marks
// made after Run returned). It does nothing before Started is set.
func (r *Report) resolveMarks() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.Started.IsZero() {
		return
	}
	for _, m := range r.marks {
		r.Events = append(r.Events, Event{Name: m.name, At: m.at.Sub(r.Started)})
	}
	r.marks = nil
	sort.SliceStable(r.Events, func(i, j int) bool { return r.Events[i].At < r.Events[j].At })
}

// stages maps a refusal's status to the stage of the buy chain that gives
// it, for answers whose body does not name the stage.
var stages = map[string]string{
	"queued":         "accepted",
	"sold_out":       "stock",
	"not_started":    "window",
	"ended":          "window",
	"limited":        "limiter",
	"captcha":        "captcha",
	"token":          "access_token",
	"already_bought": "access_token",
	"denied":         "risk",
	"bad_request":    "body",
	"unauthorized":   "login",
	"busy":           "availability",
	"retry":          "availability",
	"failed":         "order",
	"paused":         "operator",
}

// StageOf returns the stage of the buy chain that answered with status:
// stock (sold_out), window (not_started, ended), limiter (limited), captcha,
// access_token (token, already_bought), risk (denied), body (bad_request),
// login (unauthorized), availability (busy, retry: HTTP 503), order
// (failed), operator (paused: an operator paused the sale), accepted
// (queued); "http" for a bare HTTP code (http_NNN) and
// "other" for a status it does not know.
func StageOf(status string) string {
	if s, ok := stages[status]; ok {
		return s
	}
	if len(status) > 5 && status[:5] == "http_" {
		return "http"
	}
	return "other"
}

// Percentile returns the nearest-rank p-th percentile (0 < p ≤ 1) of
// sorted: the smallest value with at least p·n values at or below it. It
// returns 0 for an empty slice.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	rank := int(math.Ceil(p*float64(n) - 1e-9)) // 1-based; the epsilon absorbs 0.9*10 = 9.000000000000002
	return sorted[min(max(rank, 1), n)-1]
}

// bucketLadder lists the widths BucketWidth chooses from.
var bucketLadder = []time.Duration{
	time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond,
	10 * time.Millisecond, 20 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2 * time.Second, 5 * time.Second,
	10 * time.Second, 30 * time.Second, time.Minute, 5 * time.Minute, 10 * time.Minute,
}

// MaxBuckets bounds the number of buckets BucketWidth gives a run.
const MaxBuckets = 100

// BucketWidth returns the smallest width of the ladder 1-2-5 ms … 10 min
// that cuts span into at most MaxBuckets buckets (100 ms for a 10 s run,
// 10 ms for a 1 s run).
func BucketWidth(span time.Duration) time.Duration {
	for _, w := range bucketLadder {
		if span <= w*MaxBuckets {
			return w
		}
	}
	return time.Duration(math.Ceil(float64(span)/float64(MaxBuckets)/float64(time.Minute))) * time.Minute
}

// Bucket is one slice of time of a run: the attempts whose answer arrived
// in [Start, Start+Width).
type Bucket struct {
	Start, Width  time.Duration
	N             int            // answers in the bucket
	Outcomes      map[string]int // answers by outcome
	P50, P90, P99 time.Duration  // latency of those answers (nearest rank); 0 when N = 0
}

// Rate returns the answers per second of outcome in the bucket (all
// outcomes when outcome is "").
func (b Bucket) Rate(outcome string) float64 {
	n := b.N
	if outcome != "" {
		n = b.Outcomes[outcome]
	}
	return float64(n) / b.Width.Seconds()
}

// Buckets cuts samples into buckets of width by the instant each answer
// arrived (Sample.End), from 0 to the last answer, with no gap: a bucket
// with no answer is there with N = 0. An answer at a negative instant
// (before the buy phase) counts in the first bucket. It returns nil for no
// samples and ErrBadBucket for a width ≤ 0.
func Buckets(samples []Sample, width time.Duration) ([]Bucket, error) {
	if width <= 0 {
		return nil, fmt.Errorf("%w: %v", ErrBadBucket, width)
	}
	if len(samples) == 0 {
		return nil, nil
	}
	var last time.Duration
	for _, s := range samples {
		last = max(last, s.End())
	}
	n := int(last/width) + 1
	out := make([]Bucket, n)
	lat := make([][]time.Duration, n)
	for i := range out {
		out[i] = Bucket{Start: time.Duration(i) * width, Width: width, Outcomes: map[string]int{}}
	}
	for _, s := range samples {
		i := max(int(s.End()/width), 0)
		out[i].N++
		out[i].Outcomes[s.Outcome]++
		lat[i] = append(lat[i], s.Latency)
	}
	for i := range out {
		slices.Sort(lat[i])
		out[i].P50, out[i].P90, out[i].P99 = Percentile(lat[i], 0.50), Percentile(lat[i], 0.90), Percentile(lat[i], 0.99)
	}
	return out, nil
}

// StageCount is the number of answers one stage gave with one outcome.
type StageCount struct {
	Stage, Outcome string
	N              int
}

// ByStage counts the samples by stage and outcome, the largest first
// (ties by stage, then outcome).
func ByStage(samples []Sample) []StageCount {
	type key struct{ stage, outcome string }
	m := map[key]int{}
	for _, s := range samples {
		m[key{s.Stage, s.Outcome}]++
	}
	out := make([]StageCount, 0, len(m))
	for k, n := range m {
		out = append(out, StageCount{k.stage, k.outcome, n})
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.N != b.N {
			return a.N > b.N
		}
		if a.Stage != b.Stage {
			return a.Stage < b.Stage
		}
		return a.Outcome < b.Outcome
	})
	return out
}
