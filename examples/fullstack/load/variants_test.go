package load

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// TestParseVariantWeights: ID=WEIGHT pairs, bad ones refused by name.
func TestParseVariantWeights(t *testing.T) {
	w, err := ParseVariantWeights(" 36=6,37=3 ,38=0.5")
	if err != nil || len(w) != 3 || w["36"] != 6 || w["38"] != 0.5 {
		t.Fatalf("weights %v, %v", w, err)
	}
	for _, bad := range []string{"", "36", "36=x", "36=-1", "36=1,36=2", "=1", "36=Inf"} {
		if _, err := ParseVariantWeights(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestVariantChoiceSkewed: the buyers' sizes follow the weights — the
// given ones, else Zipf over the sizes in the sale's order (the first the
// most wanted) — and a weight for a size the sale lacks is refused.
func TestVariantChoiceSkewed(t *testing.T) {
	vs := []VariantView{{ID: "36"}, {ID: "37"}, {ID: "38"}, {ID: "39"}}
	count := func(w []float64) map[string]int {
		atts := make([]*attempt, 20000)
		for i := range atts {
			atts[i] = &attempt{}
		}
		pickVariants(atts, vs, w, rand.New(rand.NewPCG(1, 2)))
		n := map[string]int{}
		for _, a := range atts {
			n[a.variant]++
		}
		return n
	}
	w, err := variantWeights(vs, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	n := count(w) // Zipf s=1: 48%, 24%, 16%, 12%
	if !(n["36"] > n["37"] && n["37"] > n["38"] && n["38"] > n["39"] && n["39"] > 0) || n["36"] < 9000 || n["36"] > 10200 {
		t.Errorf("Zipf choices %v, want ≈ 9600, 4800, 3200, 2400", n)
	}
	w, err = variantWeights(vs, map[string]float64{"38": 3, "39": 1}, 0)
	if err != nil {
		t.Fatal(err)
	}
	n = count(w)
	if n["36"] != 0 || n["37"] != 0 || n["38"] < 14000 || n["38"] > 16000 {
		t.Errorf("choices by 38=3,39=1: %v", n)
	}
	if _, err := variantWeights(vs, map[string]float64{"40": 1}, 0); err == nil || !strings.Contains(err.Error(), `"40"`) {
		t.Errorf("a weight for a size not sold: %v", err)
	}
	if _, err := variantWeights(vs, map[string]float64{"36": 0}, 0); err == nil {
		t.Error("all weights 0 accepted")
	}
}

// TestReportVariantTable: the terminal report and the page list each
// size with its counts.
func TestReportVariantTable(t *testing.T) {
	r := &Report{Outcomes: map[string]int{}, Final: map[string]int{}, Variants: []VariantRun{
		{ID: "S", Weight: 0.75, Accepted: 2, Outcomes: map[string]int{"queued": 2, "sold_out": 7}, SoldOutAt: 1500000},
		{ID: "M", Weight: 0.25, Accepted: 1, Outcomes: map[string]int{"queued": 1}},
	}, Server: Invariants{Variants: []VariantInvariants{{ID: "S", Initial: 2, LiveOrders: 2}, {ID: "M", Initial: 5, LiveOrders: 1, RedisRemain: 4}}}}
	s := r.String()
	for _, want := range []string{"S      75.0%        2     2     0          2ms  queued=2 sold_out=7", "M      25.0%        5     1     4            -  queued=1"} {
		if !strings.Contains(s, want) {
			t.Errorf("terminal report lacks %q:\n%s", want, s)
		}
	}
	var b strings.Builder
	if err := r.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `<table id="variants">`) || !strings.Contains(b.String(), "<td>S</td><td class=\"n\">75.0%</td><td class=\"n\">2</td>") {
		t.Errorf("page without the sizes' table")
	}
}
