package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestFairLoad runs loadgen's queue and draw modes with a few users, one
// after the other, on the embedded server — on the tier's servers when the
// environment names them (the Redis Cluster when it is set: every run is a
// fresh sale in a namespace of its own, or the draw's winners were refused
// "already_bought" by the tokens the queue run spent under the same key
// prefix): every invariant must hold (exit 0) and the HTML report must
// show the queue's timeline.
func TestFairLoad(t *testing.T) {
	t.Setenv("SECKILL_KAFKA_BROKERS", "") // the embedded broker: a shared topic holds older runs' orders
	for _, mode := range []string{"queue", "draw"} {
		t.Run(mode, func(t *testing.T) {
			report := filepath.Join(t.TempDir(), "fair.html")
			code, err := run([]string{"-sale-mode", mode, "-queue-rate", "100", "-users", "40", "-stock", "10", "-c", "16", "-q",
				"-log-level", "error", "-report", report})
			if err != nil || code != 0 {
				t.Fatalf("loadgen -sale-mode %s: exit %d, %v", mode, code, err)
			}
			b, err := os.ReadFile(report)
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"Queue length and admissions over time", "<polyline", "every invariant holds"} {
				if !strings.Contains(string(b), want) {
					t.Errorf("report lacks %q", want)
				}
			}
		})
	}
}

// TestSteadyRate: the rate is read between 10 % and 90 % of the admitted
// count.
func TestSteadyRate(t *testing.T) {
	s := []fairSampleAt{{At: 0, Admitted: 0}}
	for i := 1; i < 11; i++ { // a burst of 100 (the banked allowance) in the first second, then 50/s
		s = append(s, fairSampleAt{At: time.Duration(i) * time.Second, Admitted: int64(100 + 50*(i-1))})
	}
	if got := steadyRate(s); got < 49.9 || got > 50.1 {
		t.Fatalf("steadyRate = %v, want 50", got)
	}
}
