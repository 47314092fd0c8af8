package risk

import (
	"fmt"
	"strings"
)

// maxIDLen is the longest user or device ID this package accepts, in bytes.
// IDs become parts of Redis keys (and a user ID the value of a device
// binding that lives for the bind TTL), so they are checked before any
// command is sent: an unchecked client-supplied ID could make every request
// write a key of any size.
const maxIDLen = 128

// ValidUserID reports whether s can be used as a user ID: 1..128
// bytes without '{' or '}' (braces would move the key's Cluster hash tag).
// The token package applies the same rule to its user IDs.
func ValidUserID(s string) bool {
	return s != "" && len(s) <= maxIDLen && !strings.ContainsAny(s, "{}")
}

// ValidDeviceID reports whether s can be used as a device ID: 1..128
// bytes of ASCII letters, digits and ". _ : -" (a UUID, a hex or base64url
// digest, "android:1a2b…"). Device IDs come straight from clients, so the
// charset is narrow.
func ValidDeviceID(s string) bool {
	if s == "" || len(s) > maxIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9') ||
			c == '.' || c == '_' || c == ':' || c == '-' {
			continue
		}
		return false
	}
	return true
}

// checkUserID returns nil for a valid user ID, else an error wrapping
// [ErrInvalidArgument] that does not echo an over-long ID.
func checkUserID(id string) error {
	if ValidUserID(id) {
		return nil
	}
	return fmt.Errorf("risk: user id %s: %w", describeID(id, "1..128 bytes without braces"), ErrInvalidArgument)
}

// checkDeviceID is checkUserID for device IDs.
func checkDeviceID(id string) error {
	if ValidDeviceID(id) {
		return nil
	}
	return fmt.Errorf("risk: device id %s: %w", describeID(id, "1..128 bytes of [A-Za-z0-9._:-]"), ErrInvalidArgument)
}

func describeID(id, want string) string {
	switch {
	case id == "":
		return "empty (want " + want + ")"
	case len(id) > maxIDLen:
		return fmt.Sprintf("of %d bytes (want %s)", len(id), want)
	default:
		return fmt.Sprintf("%q (want %s)", id, want)
	}
}

// invalidSubject returns the denial of a subject whose user ID (checked
// when user is set) or device ID (when device is set) is present but
// invalid: such a subject never reaches Redis.
func invalidSubject(s Subject, user, device bool) (Decision, bool) {
	if user && s.UserID != "" && !ValidUserID(s.UserID) {
		return Decision{Action: Deny, Reason: ReasonInvalidUser}, true
	}
	if device && s.DeviceID != "" && !ValidDeviceID(s.DeviceID) {
		return Decision{Action: Deny, Reason: ReasonInvalidDevice}, true
	}
	return Decision{}, false
}
