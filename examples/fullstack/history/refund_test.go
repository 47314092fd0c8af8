package history

import "testing"

// refunded is the clean history with r1 refunded after it was paid, and a
// repeat of its payment answered "refunded" (#28).
func refunded() (*h, Truth) {
	b, truth := clean()
	b.seq(0, "1", result("r1", Refunded, "o1", "")).seq(0, "1", pay("r1", "o1", 200, Refunded)).
		seq(0, "1", result("r1", Refunded, "o1", ""))
	truth["r1"] = Fact{User: "1", OrderNo: "o1", Status: Refunded}
	return b, truth
}

// TestCheckRefundedAfterPaid: refunded is a legal state after paid (and
// after created: paid and refunded between two answers), and the state
// after it is refunded alone; the last word is checked against SQL.
func TestCheckRefundedAfterPaid(t *testing.T) {
	b, truth := refunded()
	if v := Check(b.ops, truth); len(v.Violations) != 0 {
		t.Fatalf("paid then refunded: %v", v.Violations)
	}
	b, truth = clean()
	b.at(3, "4", 800, 810, result("r4", Refunded, "o4", ""))
	truth["r4"] = Fact{User: "4", OrderNo: "o4", Status: Refunded}
	if v := Check(b.ops, truth); len(v.Violations) != 0 {
		t.Fatalf("created then refunded: %v", v.Violations)
	}
	for _, tc := range []struct {
		name  string
		plant func(b *h, truth Truth)
		kind  string
		resv  string
	}{
		{"refunded then paid", func(b *h, _ Truth) { b.seq(0, "1", result("r1", Paid, "o1", "")) }, Contradiction, "r1"},
		{"refunded then cancelled", func(b *h, _ Truth) { b.seq(0, "1", result("r1", Cancelled, "o1", "")) }, Contradiction, "r1"},
		{"released then refunded", func(b *h, _ Truth) { b.seq(2, "3", result("r3", Refunded, "o3", "")) }, Contradiction, "r3"},
		{"cancelled then refunded", func(b *h, _ Truth) { b.seq(1, "2", result("r2", Refunded, "o2", "")) }, Contradiction, "r2"},
		{"told refunded, SQL says paid", func(_ *h, truth Truth) { truth["r1"] = Fact{User: "1", OrderNo: "o1", Status: Paid} }, Untruthful, "r1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, truth := refunded()
			tc.plant(b, truth)
			v := Check(b.ops, truth)
			found := false
			for _, x := range v.Violations {
				found = found || (x.Kind == tc.kind && x.Reservation == tc.resv)
			}
			if !found {
				t.Fatalf("planted %q: want a %q violation on %s, got %v", tc.name, tc.kind, tc.resv, v.Violations)
			}
		})
	}
}
