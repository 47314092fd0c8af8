package admitlog

import (
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	order := []string{"c", "a", "b", "d"}
	for _, tc := range []struct {
		name    string
		batches [][]string
		want    string // "" means it verifies
		n, skip int
	}{
		{"in order, logged out of order", [][]string{{"b", "x"}, {"c", "a"}}, "", 4, 0},
		{"abandoned skipped", [][]string{{"c"}, {"b", "d"}}, "", 3, 1},
		{"twice", [][]string{{"c", "a"}, {"a"}}, "twice", 0, 0},
		{"out of order", [][]string{{"a", "c"}}, "out of the verified order", 0, 0},
		{"pre-queue after a later entry", [][]string{{"c", "x", "a"}}, "after a later entry", 0, 0},
		{"empty", nil, "", 0, 0},
	} {
		got, skipped, err := Check(order, tc.batches)
		switch {
		case tc.want == "" && (err != nil || len(got) != tc.n || skipped != tc.skip):
			t.Errorf("%s: %d admitted, %d skipped, %v; want %d, %d", tc.name, len(got), skipped, err, tc.n, tc.skip)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}
