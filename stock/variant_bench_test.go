package stock

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/seckillkit/seckill/internal/testenv"
)

// variantBenchClient is the real Redis when SECKILL_REDIS_ADDR is set (the
// figures to quote; real is true), else miniredis (the relative cost of
// the scripts' work only: miniredis runs Lua in process).
func variantBenchClient(b *testing.B) (rdb redis.UniversalClient, prefix string, real bool) {
	b.Helper()
	if os.Getenv(testenv.EnvRedisAddr) != "" {
		rdb, prefix := benchClient(b)
		return rdb, prefix, true
	}
	rdb, _ = testenv.Miniredis(b)
	return rdb, "bv:", false
}

// processCPU returns this process's CPU seconds (getrusage: user + system;
// runtime/metrics' CPU classes move only at a GC, too coarse here).
func processCPU(b *testing.B) float64 {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// scriptStats reads the script calls the server has run, the
// microseconds it spent in them (INFO commandstats: EVAL, EVALSHA and
// their _RO forms; a script's time includes the commands it runs, and is
// wall time: a preempted server counts the wait) and its CPU seconds
// (INFO cpu: used_cpu_sys + used_cpu_user, the network included).
func scriptStats(b *testing.B, rdb redis.UniversalClient) (calls, usec int64, cpu float64) {
	b.Helper()
	info, err := rdb.Info(context.Background(), "cpu", "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				b.Fatalf("INFO %s: %v", line, err)
			}
			cpu += f
			continue
		}
		if !ok || (k != "cmdstat_eval" && k != "cmdstat_evalsha" && k != "cmdstat_eval_ro" && k != "cmdstat_evalsha_ro") {
			continue
		}
		for _, f := range strings.Split(v, ",") {
			name, val, _ := strings.Cut(f, "=")
			n, err := strconv.ParseInt(val, 10, 64)
			switch name {
			case "calls":
				calls += n
			case "usec":
				usec += n
			default:
				continue
			}
			if err != nil {
				b.Fatalf("INFO %s: %v", line, err)
			}
		}
	}
	return calls, usec, cpu
}

// BenchmarkReserveVariants: one caller, distinct buyers and reservation
// IDs, stock that never runs out, side by side in one run:
//
//   - reserve: today's Reserve of an activity without variants (the
//     anchor; a single-variant sale that is loaded without Variants runs
//     exactly this path).
//   - variant-1: Reserve of the only variant of an activity loaded with
//     one Variant (reserve_lines.lua, one line: the variant's checks and
//     the activity's limit over its variants).
//   - variant-of-12: Reserve of one variant of a 12-variant activity (the
//     activity's limit sums 12 buyers hashes).
//   - lines-3-one-activity: ReserveLines of 3 variants of one activity
//     (one script call).
//   - lines-3-across: ReserveLines of 3 plain activities (3 calls).
//   - lines-3-across-group: the same with one limit group on each line
//     (one more call: the group's allowances, all 3 lines at once).
//
// On the real Redis each case also reports, per operation, what a loaded
// machine blurs least in ns/op (a single caller's round trip is mostly
// scheduling): redis-us/op, the time the server spent in the scripts
// (INFO commandstats; the server is this benchmark's alone, else others'
// scripts count too); calls/op, the script calls; client-cpu-us/op, this
// process's CPU (getrusage).
func BenchmarkReserveVariants(b *testing.B) {
	rdb, prefix, real := variantBenchClient(b)
	ctx := context.Background()
	d, err := New(rdb, WithKeyPrefix(prefix), WithoutSoldOutCache())
	if err != nil {
		b.Fatal(err)
	}
	const lots = 1 << 40
	load := func(a Activity) {
		if _, err := d.Load(ctx, a); err != nil {
			b.Fatal(err)
		}
	}
	load(Activity{ID: "plain", Stock: lots, PerUserLimit: 3})
	load(Activity{ID: "one", PerUserLimit: 3, Variants: []Variant{{ID: "only", Stock: lots}}})
	twelve := make([]Variant, 12)
	for i := range twelve {
		twelve[i] = Variant{ID: "s" + strconv.Itoa(i), Stock: lots}
	}
	load(Activity{ID: "twelve", PerUserLimit: 3, Variants: twelve})
	for _, a := range []string{"x1", "x2", "x3"} {
		load(Activity{ID: a, Stock: lots, PerUserLimit: 3})
	}
	one := func(activity string) func(i int) error {
		return func(i int) error {
			res, err := d.Reserve(ctx, Request{Activity: activity, User: strconv.Itoa(i), Qty: 1, ReservationID: "r" + strconv.Itoa(i)})
			if err == nil && res.Status != Reserved {
				err = fmt.Errorf("status %v", res.Status)
			}
			return err
		}
	}
	lines := func(ls ...Line) func(i int) error {
		return func(i int) error {
			res, err := d.ReserveLines(ctx, Lines{User: strconv.Itoa(i), ReservationID: "c" + strconv.Itoa(i), Lines: ls})
			if err == nil && res.Status != Reserved {
				err = fmt.Errorf("status %v", res.Status)
			}
			return err
		}
	}
	cases := []struct {
		name string
		f    func(i int) error
	}{
		{"reserve", one("plain")},
		{"variant-1", one(VariantOf("one", "only"))},
		{"variant-of-12", one(VariantOf("twelve", "s5"))},
		{"lines-3-one-activity", lines(Line{Activity: VariantOf("twelve", "s0"), Qty: 1},
			Line{Activity: VariantOf("twelve", "s1"), Qty: 1}, Line{Activity: VariantOf("twelve", "s2"), Qty: 1})},
		{"lines-3-across", lines(Line{Activity: "x1", Qty: 1}, Line{Activity: "x2", Qty: 1}, Line{Activity: "x3", Qty: 1})},
		{"lines-3-across-group", lines(Line{Activity: "x1", Qty: 1, Group: "g", GroupLimit: lots},
			Line{Activity: "x2", Qty: 1, Group: "g", GroupLimit: lots}, Line{Activity: "x3", Qty: 1, Group: "g", GroupLimit: lots})},
	}
	base := 0
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			var calls0, usec0 int64
			var cpu0, rcpu0 float64
			if real {
				calls0, usec0, rcpu0 = scriptStats(b, rdb)
				cpu0 = processCPU(b)
			}
			n := 0
			for i := 0; b.Loop(); i++ {
				if err := c.f(base + i); err != nil {
					b.Fatal(err)
				}
				n++
			}
			base += 1 << 30
			if real {
				cpu := processCPU(b) - cpu0
				calls, usec, rcpu := scriptStats(b, rdb)
				b.ReportMetric(float64(usec-usec0)/float64(n), "redis-us/op")
				b.ReportMetric((rcpu-rcpu0)*1e6/float64(n), "redis-cpu-us/op")
				b.ReportMetric(float64(calls-calls0)/float64(n), "calls/op")
				b.ReportMetric(cpu*1e6/float64(n), "client-cpu-us/op")
			}
		})
	}
}

// BenchmarkHeldSizes: what one buyer holds in a sale of 12 sizes, as one
// Held of the sale (vheld.lua: one script call over the 12 buyers hashes)
// against 12 Held calls, one per size (what checkout's spent-token rule
// made before). Real Redis when SECKILL_REDIS_ADDR is set, else miniredis.
func BenchmarkHeldSizes(b *testing.B) {
	ctx := context.Background()
	rdb, prefix, _ := variantBenchClient(b)
	d, err := New(rdb, WithKeyPrefix(prefix+"hs:"))
	if err != nil {
		b.Fatal(err)
	}
	vs := make([]Variant, 12)
	for i := range vs {
		vs[i] = Variant{ID: fmt.Sprintf("s%d", i), Stock: 10}
	}
	if err := d.Reset(ctx, Activity{ID: "hs", PerUserLimit: 3, Variants: vs}); err != nil {
		b.Fatal(err)
	}
	for _, i := range []int{0, 5, 11} {
		if res, err := d.Reserve(ctx, Request{Activity: VariantOf("hs", vs[i].ID), User: "u1", Qty: 1, ReservationID: "r" + vs[i].ID}); err != nil || res.Status != Reserved {
			b.Fatalf("reserve: %+v %v", res, err)
		}
	}
	b.Run("sale", func(b *testing.B) {
		for b.Loop() {
			if n, err := d.Held(ctx, "hs", "u1"); err != nil || n != 3 {
				b.Fatalf("held %d %v", n, err)
			}
		}
	})
	b.Run("per_size", func(b *testing.B) {
		for b.Loop() {
			var sum int64
			for _, v := range vs {
				n, err := d.Held(ctx, VariantOf("hs", v.ID), "u1")
				if err != nil {
					b.Fatal(err)
				}
				sum += n
			}
			if sum != 3 {
				b.Fatalf("held %d", sum)
			}
		}
	})
}
