package load

import (
	"cmp"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckillkit/seckill/internal/testenv"
)

const ms = time.Millisecond

func TestPercentileNearestRank(t *testing.T) {
	t.Parallel()
	ten := []time.Duration{10 * ms, 20 * ms, 30 * ms, 40 * ms, 50 * ms, 60 * ms, 70 * ms, 80 * ms, 90 * ms, 100 * ms}
	for _, tc := range []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"empty", nil, 0.5, 0},
		{"one", []time.Duration{7 * ms}, 0.99, 7 * ms},
		{"p10 of ten: rank 1", ten, 0.10, 10 * ms},
		{"p50 of ten: rank 5", ten, 0.50, 50 * ms},
		{"p90 of ten: rank 9, not 10 (0.9*10 rounds up in float)", ten, 0.90, 90 * ms},
		{"p99 of ten: rank ceil(9.9) = 10", ten, 0.99, 100 * ms},
		{"p100 of ten", ten, 1, 100 * ms},
		{"p50 of three: rank ceil(1.5) = 2", []time.Duration{1 * ms, 2 * ms, 3 * ms}, 0.50, 2 * ms},
		{"p0 is the smallest", []time.Duration{1 * ms, 2 * ms, 3 * ms}, 0, 1 * ms},
	} {
		assert.Equal(t, tc.want, Percentile(tc.sorted, tc.p), tc.name)
	}
}

func TestBucketWidth(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ span, want time.Duration }{
		{0, time.Millisecond},
		{100 * ms, time.Millisecond},     // 100 buckets of 1 ms
		{101 * ms, 2 * time.Millisecond}, // 1 ms would give 101
		{time.Second, 10 * time.Millisecond},
		{10 * time.Second, 100 * time.Millisecond},
		{10*time.Second + time.Millisecond, 200 * time.Millisecond},
		{45 * time.Second, 500 * time.Millisecond},
		{100 * time.Minute, time.Minute},
		{1000 * time.Minute, 10 * time.Minute},
		{2000 * time.Minute, 20 * time.Minute}, // past the ladder: whole minutes
	} {
		got := BucketWidth(tc.span)
		assert.Equal(t, tc.want, got, "span %v", tc.span)
		assert.LessOrEqual(t, int(tc.span/got)+1, MaxBuckets+1, "span %v", tc.span)
	}
}

func TestBucketsByHand(t *testing.T) {
	t.Parallel()
	samples := []Sample{
		{Start: 0, Latency: 30 * ms, Outcome: "queued"},           // ends 30 ms: bucket 0
		{Start: 10 * ms, Latency: 80 * ms, Outcome: "sold_out"},   // ends 90 ms: bucket 0
		{Start: 50 * ms, Latency: 60 * ms, Outcome: "sold_out"},   // ends 110 ms: bucket 1
		{Start: 20 * ms, Latency: 280 * ms, Outcome: "limited"},   // ends 300 ms: bucket 3 (its start)
		{Start: -50 * ms, Latency: 10 * ms, Outcome: "sold_out"},  // ends -40 ms: before the phase, bucket 0
		{Start: 100 * ms, Latency: 99 * ms, Outcome: "sold_out"},  // ends 199 ms: bucket 1
		{Start: 150 * ms, Latency: 150 * ms, Outcome: "sold_out"}, // ends 300 ms: bucket 3
	}
	got, err := Buckets(samples, 100*ms)
	require.NoError(t, err)
	require.Len(t, got, 4)

	b0 := got[0]
	assert.Equal(t, time.Duration(0), b0.Start)
	assert.Equal(t, 100*ms, b0.Width)
	assert.Equal(t, 3, b0.N)
	assert.Equal(t, map[string]int{"queued": 1, "sold_out": 2}, b0.Outcomes)
	// latencies 10, 30, 80: p50 rank 2, p90 rank ceil(2.7) = 3, p99 rank 3
	assert.Equal(t, []time.Duration{30 * ms, 80 * ms, 80 * ms}, []time.Duration{b0.P50, b0.P90, b0.P99})
	assert.InDelta(t, 30.0, b0.Rate(""), 1e-9) // 3 answers in 0.1 s
	assert.InDelta(t, 10.0, b0.Rate("queued"), 1e-9)
	assert.InDelta(t, 0.0, b0.Rate("limited"), 1e-9)

	b1 := got[1]
	assert.Equal(t, 100*ms, b1.Start)
	assert.Equal(t, 2, b1.N)
	// latencies 60, 99: p50 rank 1, p90 rank 2
	assert.Equal(t, []time.Duration{60 * ms, 99 * ms, 99 * ms}, []time.Duration{b1.P50, b1.P90, b1.P99})

	b2 := got[2] // no answer ended in [200, 300) ms: present, empty
	assert.Equal(t, 200*ms, b2.Start)
	assert.Equal(t, 0, b2.N)
	assert.Empty(t, b2.Outcomes)
	assert.Equal(t, time.Duration(0), b2.P99)

	b3 := got[3]
	assert.Equal(t, 2, b3.N)
	assert.Equal(t, map[string]int{"limited": 1, "sold_out": 1}, b3.Outcomes)
	assert.Equal(t, []time.Duration{150 * ms, 280 * ms, 280 * ms}, []time.Duration{b3.P50, b3.P90, b3.P99})
}

func TestBucketsCountEverySample(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	outcomes := []string{"queued", "sold_out", "limited", "busy"}
	var samples []Sample
	want := map[string]int{}
	for range 5000 {
		s := Sample{Start: time.Duration(rng.Int64N(int64(3 * time.Second))), Latency: time.Duration(rng.Int64N(int64(200 * ms))), Outcome: outcomes[rng.IntN(len(outcomes))]}
		samples = append(samples, s)
		want[s.Outcome]++
	}
	got, err := Buckets(samples, 50*ms)
	require.NoError(t, err)
	counted := map[string]int{}
	n := 0
	for i, b := range got {
		assert.Equal(t, time.Duration(i)*50*ms, b.Start, "buckets are contiguous")
		sum := 0
		for o, c := range b.Outcomes {
			counted[o] += c
			sum += c
		}
		assert.Equal(t, b.N, sum, "bucket %d", i)
		n += b.N
		assert.LessOrEqual(t, b.P50, b.P90)
		assert.LessOrEqual(t, b.P90, b.P99)
	}
	assert.Equal(t, len(samples), n)
	assert.Equal(t, want, counted)
}

func TestBucketsBadInput(t *testing.T) {
	t.Parallel()
	_, err := Buckets([]Sample{{Latency: ms}}, 0)
	require.ErrorIs(t, err, ErrBadBucket)
	_, err = Buckets(nil, -time.Second)
	require.ErrorIs(t, err, ErrBadBucket)
	got, err := Buckets(nil, time.Second)
	require.NoError(t, err)
	assert.Nil(t, got)
}

func TestStageOf(t *testing.T) {
	t.Parallel()
	for status, stage := range map[string]string{
		"queued": "accepted", "sold_out": "stock", "limited": "limiter", "captcha": "captcha",
		"token": "access_token", "already_bought": "access_token", "denied": "risk",
		"busy": "availability", "retry": "availability", "not_started": "window", "ended": "window",
		"http_502": "http", "http_": "other", "weird": "other", "": "other",
	} {
		assert.Equal(t, stage, StageOf(status), status)
	}
}

func TestByStage(t *testing.T) {
	t.Parallel()
	s := func(stage, outcome string) Sample { return Sample{Stage: stage, Outcome: outcome} }
	got := ByStage([]Sample{
		s("stock", "sold_out"), s("limiter", "limited"), s("stock", "sold_out"),
		s("accepted", "queued"), s("risk", "limited"), s("accepted", "queued"), s("stock", "sold_out"),
	})
	assert.Equal(t, []StageCount{
		{"stock", "sold_out", 3},
		{"accepted", "queued", 2},
		{"limiter", "limited", 1}, // ties by stage name
		{"risk", "limited", 1},
	}, got)
}

func TestMarks(t *testing.T) {
	t.Parallel()
	t0 := testenv.Epoch() // only offsets from it are computed; nothing waits on it
	r := &Report{Started: t0}
	r.MarkAt("top-up", t0.Add(1500*ms))
	r.MarkAt("warm-up", t0.Add(-200*ms))
	r.MarkAt("pause", t0.Add(700*ms))
	r.resolveMarks()
	assert.Equal(t, []Event{{"warm-up", -200 * ms}, {"pause", 700 * ms}, {"top-up", 1500 * ms}}, r.Events)
	r.resolveMarks() // idempotent
	assert.Len(t, r.Events, 3)
	r.MarkAt("late", t0.Add(2*time.Second)) // after Run: WriteHTML resolves it
	require.NoError(t, r.WriteHTML(io.Discard))
	assert.Equal(t, Event{"late", 2 * time.Second}, r.Events[3])

	unstarted := &Report{}
	unstarted.Mark("early")
	unstarted.resolveMarks() // no Started yet: the mark waits
	assert.Empty(t, unstarted.Events)
}

// Marks come from other goroutines while Run works (run with -race).
func TestMarkConcurrent(t *testing.T) {
	t.Parallel()
	r := &Report{Started: time.Now()}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 50 {
				r.Mark(fmt.Sprintf("m%d-%d", i, j))
			}
		}()
	}
	wg.Wait()
	r.resolveMarks()
	assert.Len(t, r.Events, 400)
	assert.True(t, slices.IsSortedFunc(r.Events, func(a, b Event) int { return cmp.Compare(a.At, b.At) }))
}
