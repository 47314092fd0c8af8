package stock

import (
	"fmt"
	"strconv"
)

// MaxIDLen is the longest activity or user ID accepted, in bytes.
const MaxIDLen = 64

// idByte marks the bytes an activity or user ID may hold: ASCII letters,
// digits and . _ @ + -. That covers decimal numbers, UUIDs, ULIDs, e-mail
// like names and slugs, and leaves out ':' (the separator of ledger
// records and key parts), '{' and '}' (the Cluster hash tag), spaces,
// control bytes and everything outside ASCII.
var idByte = func() (t [256]bool) {
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
	}
	for c := 'A'; c <= 'Z'; c++ {
		t[c] = true
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for _, c := range "._@+-" {
		t[c] = true
	}
	return t
}()

// ValidID reports whether id is a valid activity or user ID: 1 to
// [MaxIDLen] bytes, each an ASCII letter, a digit or one of . _ @ + -.
// A shop with numeric IDs passes strconv.FormatInt(id, 10).
func ValidID(id string) bool {
	if len(id) == 0 || len(id) > MaxIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		if !idByte[id[i]] {
			return false
		}
	}
	return true
}

// checkID returns nil when id is valid, or an error wrapping sentinel that
// names what (e.g. "activity ID") and quotes id only when it is not too
// long to quote.
func checkID(sentinel error, what, id string) error {
	if ValidID(id) {
		return nil
	}
	return idError(sentinel, what, id)
}

// idError is the refusal of an invalid id (kept apart so that checkID
// stays small enough to inline).
func idError(sentinel error, what, id string) error {
	switch {
	case id == "":
		return fmt.Errorf("%w: empty %s", sentinel, what)
	case len(id) > MaxIDLen:
		return fmt.Errorf("%w: %s of %d bytes, longer than %d", sentinel, what, len(id), MaxIDLen)
	}
	return fmt.Errorf("%w: %s %q: only ASCII letters, digits and . _ @ + - are allowed", sentinel, what, id)
}

// decimalID returns the value of id when it is the canonical decimal form
// of an int64 (what strconv.FormatInt writes: no sign but '-', no leading
// zero), so a numeric ID is routed exactly as it was when IDs were int64.
func decimalID(id string) (int64, bool) {
	if len(id) == 0 || len(id) > 20 {
		return 0, false
	}
	s := id
	if s[0] == '-' {
		s = s[1:]
	}
	if len(s) == 0 || s[0] < '0' || s[0] > '9' || s[0] == '0' && len(s) > 1 || s == "0" && len(id) > 1 {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseInt(id, 10, 64)
	return v, err == nil
}

// checkActivity checks the activity ID given to a Reserve, Release or
// lookup: a [ValidID], or a variant of one ([VariantOf]).
func checkActivity(activity string) error {
	if ValidID(activity) || validVariant(activity) {
		return nil
	}
	return idError(ErrInvalidArgument, "activity ID", activity)
}

// showID returns id for a message: as it is when valid, else quoted and cut
// to MaxIDLen bytes, so that a bad ID from a caller's source never floods a
// log.
func showID(id string) string {
	if ValidID(id) {
		return id
	}
	if len(id) > MaxIDLen {
		return strconv.Quote(id[:MaxIDLen]) + "..."
	}
	return strconv.Quote(id)
}

// MaxReservationIDLen is the longest reservation ID, in bytes: the width of
// the reservation_id columns of the order package (order.MaxReservationIDLen
// is the same number).
const MaxReservationIDLen = 128

// ValidReservationID reports whether id can be a reservation ID
// ([Request.ReservationID]): 1 to [MaxReservationIDLen] bytes of printable
// ASCII other than space (0x21..0x7E). It is the one rule of the library:
// order.ValidReservationID is the same function, so every reservation that
// Reserve accepts can become an order, and the stores compare IDs byte for
// byte (ascii_bin on MySQL/MariaDB, where a space at the end would not
// count). Reserve refuses any other ID; Release and Lookup accept any ID
// of 1 to MaxReservationIDLen bytes, so an entry made under an older rule
// can still be given back.
func ValidReservationID(id string) bool {
	if len(id) == 0 || len(id) > MaxReservationIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7e {
			return false
		}
	}
	return true
}
