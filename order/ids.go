package order

import (
	"fmt"
	"strings"

	"github.com/seckillkit/seckill/order/internal/dbx"
)

// ValidID reports whether s can be used as a user or activity ID: 1 to
// [MaxIDLen] bytes of ASCII letters, digits and ". _ @ + -" — a decimal
// number, a UUID, a ULID, "user@shop", a base64url digest. The stock
// package applies the same rule, so an ID valid in one is valid in the
// other. IDs are compared byte for byte (case matters) in Redis and in
// every database: the MySQL/MariaDB columns are ascii_bin.
func ValidID(s string) bool {
	if s == "" || len(s) > MaxIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			c == '.' || c == '_' || c == '@' || c == '+' || c == '-' {
			continue
		}
		return false
	}
	return true
}

// validLineActivity reports whether s can be the activity of a [Line]: a
// [ValidID], or a variant's activity string "a/v" (stock.VariantOf) whose
// two parts are ValidID, at most [MaxIDLen] bytes in all (the activity_id
// and id columns).
func validLineActivity(s string) bool {
	if len(s) > MaxIDLen {
		return false
	}
	a, v, variant := strings.Cut(s, "/")
	if !variant {
		return ValidID(s)
	}
	return ValidID(a) && ValidID(v)
}

// checkID returns nil for a valid ID, else an error wrapping
// [ErrInvalidID] that names what (a "user_id", an "activity_id") and
// never echoes an over-long ID.
func checkID(what, id string) error {
	if ValidID(id) {
		return nil
	}
	return fmt.Errorf("%w: %s %s", ErrInvalidID, what, dbx.DescribeID(id, MaxIDLen))
}

// ValidReservationID reports whether s can be a reservation ID
// ([Message.ReservationID], handoff.ReleaseRequest.ReservationID): 1 to
// [MaxReservationIDLen] bytes of printable ASCII other than space
// (0x21..0x7E). It is the rule stock.ValidReservationID applies before a
// reservation is made, so every reservation stock accepts can become an
// order. The columns compare IDs byte for byte (ascii_bin on MySQL/MariaDB).
// A message with any other ID is refused ([ErrInvalidMessage]), so such a
// reservation can never become an order: handoff.Fence releases it without a
// fence row.
func ValidReservationID(s string) bool {
	if s == "" || len(s) > MaxReservationIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// reservationIDRule describes ValidReservationID in refusals.
const reservationIDRule = "reservation_id must be 1..128 bytes of printable ASCII without space"
