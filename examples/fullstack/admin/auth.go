package admin

import (
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

// MinTokenLen is the shortest secret [BearerToken] accepts.
const MinTokenLen = 16

// BearerToken returns an Authenticator that accepts a request whose
// Authorization header is "Bearer <secret>", comparing in constant time
// (SHA-256 digests of both, so not even the length leaks). The operator it
// reports is "token:" and the first 8 hex digits of the secret's SHA-256,
// which tells tokens apart in the audit log without recording them. A
// secret shorter than [MinTokenLen] bytes is refused with [ErrInvalidOption].
func BearerToken(secret string) (Authenticator, error) {
	if len(secret) < MinTokenLen {
		return nil, fmt.Errorf("%w: bearer secret shorter than %d bytes", ErrInvalidOption, MinTokenLen)
	}
	want := sha256.Sum256([]byte(secret))
	operator := "token:" + hex.EncodeToString(want[:4])
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
