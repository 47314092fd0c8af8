package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestFairLoad runs loadgen's queue and draw modes on the embedded server
// with a few users: every invariant must hold (exit 0) and the HTML report
// must show the queue's timeline.
func TestFairLoad(t *testing.T) {
	for _, v := range []string{"SECKILL_REDIS_ADDR", "SECKILL_REDIS_CLUSTER_ADDRS", "SECKILL_MYSQL_DSN", "SECKILL_KAFKA_BROKERS"} {
		t.Setenv(v, "") // the embedded server, whatever the tier's servers
	}
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
