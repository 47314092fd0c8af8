package load

import "testing"

// picked spreads a share evenly, the first included; payShare defaults to
// every third, as the run paid before the share was configurable.
func TestPickedSpreadsTheShare(t *testing.T) {
	count := func(share float64, n int) (k int, first bool) {
		for i := range n {
			if picked(i, share) {
				k++
			}
		}
		return k, picked(0, share)
	}
	for _, tc := range []struct {
		share float64
		want  int
	}{{0, 0}, {-1, 0}, {1.0 / 3, 100}, {0.5, 150}, {1, 300}, {0.1, 30}} {
		if k, first := count(tc.share, 300); k != tc.want || (tc.want > 0 && !first) {
			t.Errorf("share %v of 300: %d picked (first %v), want %d", tc.share, k, first, tc.want)
		}
	}
	for i := range 12 {
		if picked(i, Config{}.payShare()) != (i%3 == 0) {
			t.Errorf("default pay share at %d: %v, want every third", i, picked(i, Config{}.payShare()))
		}
	}
}
