package workspace

import (
	"strings"
	"testing"

	"github.com/seckillkit/seckill/order"
	"github.com/seckillkit/seckill/stock"
)

// TestOneReservationIDRule: stock and order never import each other, so
// each states the reservation-ID rule itself (stock.ValidReservationID,
// order.ValidReservationID); they must agree, byte for byte and length for
// length, or a reservation stock accepts could never become an order (N2:
// stock took 128 bytes, order 64, and a UUID buyer could never buy).
func TestOneReservationIDRule(t *testing.T) {
	if stock.MaxReservationIDLen != order.MaxReservationIDLen {
		t.Fatalf("stock.MaxReservationIDLen %d, order.MaxReservationIDLen %d", stock.MaxReservationIDLen, order.MaxReservationIDLen)
	}
	limit := stock.MaxReservationIDLen
	ids := []string{
		"", "r", "r-1", "a:b", "{x}", "~!#$%&*/;<=>?[]^`|",
		"u36.7c9e6679-7425-40de-944b-e07fc1f90ae7-0123456789abcdef01234567", // 65 bytes: the case of N2
		"u64." + strings.Repeat("u", 64) + "-" + strings.Repeat("r", 40),    // the reference deployment's longest
		strings.Repeat("x", 64), strings.Repeat("x", 65), strings.Repeat("x", limit), strings.Repeat("x", limit+1),
		strings.Repeat("x", 10*limit),
		"a b", "r ", " r", "r\t", "r\n", "r\x00", "r\x7f", "é", "r\xff", "\x20", "\x21", "\x7e",
	}
	for c := 0; c < 256; c++ {
		ids = append(ids, "r"+string([]byte{byte(c)}))
	}
	for _, id := range ids {
		s, o := stock.ValidReservationID(id), order.ValidReservationID(id)
		if s != o {
			t.Errorf("%q (%d bytes): stock says %v, order says %v", id, len(id), s, o)
		}
	}
	// The rule itself, as documented: 1..128 bytes of 0x21..0x7e.
	for _, tc := range []struct {
		id   string
		want bool
	}{{"r", true}, {strings.Repeat("x", limit), true}, {"", false}, {strings.Repeat("x", limit+1), false}, {"a b", false}, {"é", false}} {
		if got := stock.ValidReservationID(tc.id); got != tc.want {
			t.Errorf("ValidReservationID(%q) = %v, want %v", tc.id, got, tc.want)
		}
	}
}
