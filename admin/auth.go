package admin

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
)

// Authenticator identifies the operator of a request. It returns the
// operator's name (1..128 bytes, recorded in the audit log) or an error:
// one wrapping [ErrForbidden] is answered 403, any other 401. The handler
// calls it before reading anything else of the request.
type Authenticator func(*http.Request) (operator string, err error)

// MinTokenLen is the shortest secret, and the shortest label key,
// [BearerToken] accepts: 32 bytes, e.g. 24 random bytes in base64
// (head -c 24 /dev/urandom | base64).
const MinTokenLen = 32

// BearerToken returns an Authenticator that accepts a request whose
// Authorization header is "Bearer <secret>", comparing in constant time
// (SHA-256 digests of both, so not even the length leaks).
//
// The operator it reports is "token:" and 16 hex digits of
// HMAC-SHA256(labelKey, secret): it tells tokens apart in the audit log
// without recording them, and, keyed by a server secret the audit log does
// not hold, it is no oracle to test guesses of the token against offline
// (an unsalted hash of the token would be). labelKey must be at least
// [MinTokenLen] bytes, derived from a server secret (not from the token);
// keep it stable across restarts and replicas, or the same token gets a
// new label, and an Idempotency-Key (unique per operator) no longer
// replays across the change.
//
// A secret shorter than [MinTokenLen] bytes, or a short label key, is
// refused with [ErrInvalidConfig].
func BearerToken(secret string, labelKey []byte) (Authenticator, error) {
	if len(secret) < MinTokenLen {
		return nil, fmt.Errorf("%w: bearer secret of %d bytes, want at least %d (24 random bytes in base64)", ErrInvalidConfig, len(secret), MinTokenLen)
	}
	if len(labelKey) < MinTokenLen {
		return nil, fmt.Errorf("%w: label key of %d bytes, want at least %d", ErrInvalidConfig, len(labelKey), MinTokenLen)
	}
	want := sha256.Sum256([]byte(secret))
	mac := hmac.New(sha256.New, labelKey)
	mac.Write([]byte("seckill admin operator label v1\x00"))
	mac.Write([]byte(secret))
	operator := "token:" + hex.EncodeToString(mac.Sum(nil)[:8])
	return func(r *http.Request) (string, error) {
		h := r.Header.Get("Authorization")
		const scheme = "bearer "
		if len(h) <= len(scheme) || !strings.EqualFold(h[:len(scheme)], scheme) {
			return "", fmt.Errorf("%w: no bearer token", ErrUnauthorized)
		}
		got := sha256.Sum256([]byte(strings.TrimSpace(h[len(scheme):])))
		if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
			return "", fmt.Errorf("%w: wrong bearer token", ErrUnauthorized)
		}
		return operator, nil
	}, nil
}
