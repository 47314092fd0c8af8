package waitroom

import (
	"context"
	"crypto/sha256"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/seckillkit/seckill/internal/testenv"
)

// Fairness: the admission order of a pre-queue is a uniform random
// permutation. fairnessRuns rooms each take fairnessN users who join the
// pre-queue in a known order (u0 first), then 3 who join after the start;
// the count of joiner i admitted at place j fills an n×n table. Under a
// uniform permutation each cell expects runs/n; Pearson's chi-square over
// the table (margins fixed: (n−1)² degrees of freedom) must not reach
// p < fairnessAlpha. The seeds are fixed (SHA-256 of "fair/<run>"), so the
// test is reproducible and cannot flake (the figures are in its log); a true uniform shuffle fails a
// given set of seeds with probability 0.001.
const (
	fairnessRuns      = 2000
	fairnessRunsShort = 400 // with -short
	fairnessN         = 8
	fairnessAlpha     = 0.001
)

// fairnessTable runs the rooms and returns the table and the statistic's
// p-value. It also fails t unless every run admits the post-start joiners
// after the whole pre-queue, in join order.
func fairnessTable(t *testing.T) (float64, float64) {
	ctx := context.Background()
	rdb := testenv.Redis(t)
	c := testenv.NewClock(t0)
	r := newRoom(t, rdb, c)
	var table [fairnessN][fairnessN]float64
	pre := users("u", fairnessN)
	post := []string{"late2", "late0", "late1"}
	runs := fairnessRuns
	if testing.Short() {
		runs = fairnessRunsShort
	}
	for run := range runs {
		seed := sha256.Sum256(fmt.Appendf(nil, "fair/%d", run))
		sale := fmt.Sprintf("r%d", run)
		c.Set(t0.Add(-time.Minute))
		if err := r.Configure(ctx, sale, Config{Start: t0, Commitment: Commit(seed[:]), Rate: 1000}); err != nil {
			t.Fatal(err)
		}
		join(t, r, sale, pre...)
		c.Set(t0)
		join(t, r, sale, post...)
		if err := r.Start(ctx, sale, seed[:]); err != nil {
			t.Fatal(err)
		}
		if got, err := r.Admit(ctx, sale, 100); err != nil || len(got) != 0 { // starts the allowance
			t.Fatalf("run %d: first admit %v, %v", run, got, err)
		}
		c.Add(time.Second)
		got, err := r.Admit(ctx, sale, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != fairnessN+len(post) || !slices.Equal(got[fairnessN:], post) {
			t.Fatalf("run %d: admitted %v: the post-start joiners are not last in join order", run, got)
		}
		for place, u := range got[:fairnessN] {
			var i int
			fmt.Sscanf(u, "u%d", &i)
			table[i][place]++
		}
	}
	want := float64(runs) / fairnessN
	stat := 0.0
	for i := range table {
		for j := range table[i] {
			d := table[i][j] - want
			stat += d * d / want
		}
	}
	df := float64((fairnessN - 1) * (fairnessN - 1))
	return stat, chiSquareSurvival(stat, df)
}

func TestFairnessUniformPreQueue(t *testing.T) {
	stat, p := fairnessTable(t)
	t.Logf("chi-square %.1f, df %d, p = %.4f (fails below %g)", stat, (fairnessN-1)*(fairnessN-1), p, fairnessAlpha)
	if p < fairnessAlpha {
		t.Fatalf("the pre-queue order is not uniform: chi-square %.1f, p = %g < %g", stat, p, fairnessAlpha)
	}
}

// TestFairnessCatchesBiasedShuffle: the same check fails an off-by-one
// Fisher–Yates (Sattolo's algorithm: j drawn from [0, i) instead of
// [0, i], so nobody keeps their sorted place).
func TestFairnessCatchesBiasedShuffle(t *testing.T) {
	shuffleBias = 1
	defer func() { shuffleBias = 0 }()
	stat, p := fairnessTable(t)
	t.Logf("biased shuffle: chi-square %.1f, p = %g", stat, p)
	if p >= fairnessAlpha {
		t.Fatalf("the biased shuffle passed the fairness check: chi-square %.1f, p = %g", stat, p)
	}
}

// chiSquareSurvival is P(X ≥ x) for X chi-square with df degrees of
// freedom: the regularized upper incomplete gamma Q(df/2, x/2) (series
// below a+1, continued fraction above; Numerical Recipes §6.2).
func chiSquareSurvival(x, df float64) float64 {
	a, x := df/2, x/2
	if x <= 0 {
		return 1
	}
	lg, _ := math.Lgamma(a)
	if x < a+1 {
		sum, del, ap := 1/a, 1/a, a
		for range 1000 {
			ap++
			del *= x / ap
			sum += del
			if math.Abs(del) < math.Abs(sum)*1e-15 {
				break
			}
		}
		return 1 - sum*math.Exp(-x+a*math.Log(x)-lg)
	}
	const tiny = 1e-300
	b := x + 1 - a
	cc, d := 1/tiny, 1/b
	h := d
	for i := 1; i < 1000; i++ {
		an := -float64(i) * (float64(i) - a)
		b += 2
		d = an*d + b
		if math.Abs(d) < tiny {
			d = tiny
		}
		cc = b + an/cc
		if math.Abs(cc) < tiny {
			cc = tiny
		}
		d = 1 / d
		del := d * cc
		h *= del
		if math.Abs(del-1) < 1e-15 {
			break
		}
	}
	return math.Exp(-x+a*math.Log(x)-lg) * h
}

// TestChiSquareSurvival checks the p-value function on known quantiles.
func TestChiSquareSurvival(t *testing.T) {
	for _, tc := range []struct{ x, df, p float64 }{
		{3.841, 1, 0.05}, {10.828, 1, 0.001}, {66.339, 49, 0.05}, {85.351, 49, 0.001}, {16.266, 3, 0.001},
	} {
		if got := chiSquareSurvival(tc.x, tc.df); math.Abs(got-tc.p) > 0.0005 {
			t.Errorf("Q(%v; df %v) = %.5f, want %.4f", tc.x, tc.df, got, tc.p)
		}
	}
}
