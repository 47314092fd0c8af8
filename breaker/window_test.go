package breaker

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

func TestEpochMatchesDivision(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	widths := []int64{1, 2, 3, 7, 1000, int64(time.Millisecond), int64(time.Second), int64(time.Second) + 1,
		int64(time.Hour), math.MaxInt64 / 3, math.MaxInt64}
	for range 200 {
		widths = append(widths, r.Int64N(math.MaxInt64)+1, r.Int64N(int64(time.Minute))+1)
	}
	for _, width := range widths {
		w := newWindow(width, 1)
		nows := []int64{0, 1, width - 1, width, width + 1, math.MaxInt64, math.MaxInt64 - 1}
		if width < math.MaxInt64/4 {
			nows = append(nows, 2*width-1, 2*width, 3*width+1)
		}
		for range 200 {
			nows = append(nows, r.Int64N(math.MaxInt64), r.Int64N(int64(24*time.Hour)))
		}
		for _, now := range nows {
			if now < 0 {
				continue
			}
			if got, want := w.epoch(now), now/width; got != want {
				t.Fatalf("epoch(%d) with width %d = %d, want %d", now, width, got, want)
			}
		}
	}
}

func TestIndex(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 2, 3, 8, 10, 1024} {
		w := newWindow(1, n)
		for e := int64(0); e < 5000; e++ {
			if got := w.index(e); got != int(e%int64(n)) {
				t.Fatalf("index(%d) with %d buckets = %d", e, n, got)
			}
		}
	}
}
