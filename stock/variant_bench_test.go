package stock

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/seckillkit/seckill/internal/testenv"
)

// variantBenchClient is the real Redis when SECKILL_REDIS_ADDR is set (the
// figures to quote), else miniredis (the relative cost of the scripts'
// work only: miniredis runs Lua in process).
func variantBenchClient(b *testing.B) (redis.UniversalClient, string) {
	b.Helper()
	if os.Getenv(testenv.EnvRedisAddr) != "" {
		return benchClient(b)
	}
	rdb, _ := testenv.Miniredis(b)
	return rdb, "bv:"
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
//   - lines-3-across-group: the same with a limit group on each line (3
//     more calls: the group allowances).
func BenchmarkReserveVariants(b *testing.B) {
	rdb, prefix := variantBenchClient(b)
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
			for i := 0; b.Loop(); i++ {
				if err := c.f(base + i); err != nil {
					b.Fatal(err)
				}
			}
			base += 1 << 30
		})
	}
}
