package app

import (
	"strings"
	"testing"

	"github.com/seckillkit/seckill/checkout"
	"github.com/seckillkit/seckill/stock"
)

// TestClientReservationIDKeepsTheRule: every request ID the buy accepts,
// for every valid user ID, gives a reservation ID within the library's rule
// (stock.ValidReservationID, which order applies too); one byte more is
// refused before anything is reserved.
func TestClientReservationIDKeepsTheRule(t *testing.T) {
	longest := strings.Repeat("u", stock.MaxIDLen)
	for _, user := range []string{"1", "7c9e6679-7425-40de-944b-e07fc1f90ae7", longest} {
		for _, rid := range []string{"a", "0123456789abcdef01234567", strings.Repeat("r", checkout.MaxRequestIDLen)} {
			resv, err := checkout.ReservationID(user, rid)
			if err != nil || resv != clientReservationID(user, rid) || !stock.ValidReservationID(resv) {
				t.Errorf("user %d bytes, request ID %d bytes: %q %v", len(user), len(rid), resv, err)
			}
		}
		for _, rid := range []string{"", strings.Repeat("r", checkout.MaxRequestIDLen+1), "a b", "a.b"} {
			if _, err := checkout.ReservationID(user, rid); err == nil {
				t.Errorf("user %d bytes, request ID %q accepted", len(user), rid)
			}
		}
	}
	if resv := clientReservationID(longest, strings.Repeat("r", checkout.MaxRequestIDLen)); len(resv) != 109 {
		t.Errorf("longest reservation ID %d bytes, want 109", len(resv))
	}
	if !strings.Contains(requestIDRule, "128") {
		t.Errorf("the refusal does not name the limit: %q", requestIDRule)
	}
}

// clientReservationID is checkout.ReservationID of a valid attempt ("" for
// an invalid one).
func clientReservationID(user, requestID string) string {
	id, _ := checkout.ReservationID(user, requestID)
	return id
}

// clientReservationPrefix starts every reservation ID of user's attempts:
// checkout.ReservationID's, up to the request ID.
func clientReservationPrefix(user string) string {
	return strings.TrimSuffix(clientReservationID(user, "x"), "x")
}
