package risk

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Authenticator turns a bearer token into a user ID. It returns an error
// wrapping [ErrInvalidToken] for an unknown, expired or revoked token, and
// any other error when it cannot tell (store down): the [NewAuth]
// middleware answers 401 for the first and 503 for the second.
// [SessionStore] and [AuthCache] are Authenticators.
type Authenticator interface {
	Authenticate(ctx context.Context, token string) (userID string, err error)
}

// AuthenticatorFunc adapts a function to [Authenticator].
type AuthenticatorFunc func(ctx context.Context, token string) (string, error)

// Authenticate calls f.
func (f AuthenticatorFunc) Authenticate(ctx context.Context, token string) (string, error) {
	return f(ctx, token)
}

// maxTokenLen is the longest bearer token [ParseBearer] accepts.
const maxTokenLen = 4096

// ParseBearer extracts the token of an Authorization header value
// "Bearer <token>" (scheme case-insensitive, RFC 6750). The token must be a
// b64token: letters, digits and "-._~+/", then optional "=" padding, at
// most 4096 bytes. It returns [ErrNoToken] for an empty header and
// [ErrMalformedToken] for anything else that does not fit; it never panics
// and does not allocate.
func ParseBearer(header string) (string, error) {
	if header == "" {
		return "", ErrNoToken
	}
	const scheme = "bearer"
	if len(header) < len(scheme)+2 || !strings.EqualFold(header[:len(scheme)], scheme) || header[len(scheme)] != ' ' {
		return "", ErrMalformedToken
	}
	tok := strings.TrimLeft(header[len(scheme):], " ")
	if !validToken(tok) {
		return "", ErrMalformedToken
	}
	return tok, nil
}

func validToken(tok string) bool {
	if tok == "" || len(tok) > maxTokenLen {
		return false
	}
	i := 0
	for ; i < len(tok); i++ {
		c := tok[i]
		if ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9') ||
			c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/' {
			continue
		}
		break
	}
	if i == 0 {
		return false
	}
	for ; i < len(tok); i++ {
		if tok[i] != '=' {
			return false
		}
	}
	return true
}

// NewAuth returns HTTP middleware that authenticates each request by its
// bearer token (the Authorization header, or the cookie of [WithCookie]
// when the header is absent) through a, and puts the user ID in the
// request context ([UserFrom]).
//
// Failures answer JSON and never reach the next handler:
//
//	401 {"error":"unauthorized","reason":"missing_token"}   no token
//	401 {"error":"unauthorized","reason":"malformed_token"} not a Bearer b64token
//	401 {"error":"unauthorized","reason":"invalid_token"}   unknown, expired, revoked
//	503 {"error":"unavailable"}                             the authenticator failed
//
// 401 answers carry WWW-Authenticate: Bearer (RFC 6750). The hot path is one
// Authenticator call: one Redis GET with [SessionStore], none on an
// [AuthCache] hit. The middleware is safe for concurrent use.
//
// Options (each an [AuthOption]): [WithCookie], [WithOnAuthFailure],
// [WithLogger], [WithObserver]; a nil option is ignored. A nil
// authenticator or a bad option fails with [ErrInvalidConfig].
func NewAuth(a Authenticator, opts ...AuthOption) (func(http.Handler) http.Handler, error) {
	if a == nil {
		return nil, fmt.Errorf("risk: nil authenticator: %w", ErrInvalidConfig)
	}
	o, err := buildOptions(opts, AuthOption.applyAuth)
	if err != nil {
		return nil, err
	}
	m := &auth{a: a, o: o}
	return m.handle, nil
}

// auth is the state of one [NewAuth] middleware.
type auth struct {
	a Authenticator
	o options
}

// token returns the request's bearer token: the Authorization header, or
// the cookie set by [WithCookie] when the header is absent.
func (a *auth) token(r *http.Request) (string, error) {
	h := r.Header.Get("Authorization")
	if h == "" && a.o.cookie != "" {
		c, err := r.Cookie(a.o.cookie)
		if err != nil || c.Value == "" {
			return "", ErrNoToken
		}
		if !validToken(c.Value) {
			return "", ErrMalformedToken
		}
		return c.Value, nil
	}
	return ParseBearer(h)
}

// handle wraps next.
func (a *auth) handle(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var start time.Time
		if a.o.observer != nil {
			start = time.Now()
		}
		tok, err := a.token(r)
		var user string
		if err == nil {
			user, err = a.a.Authenticate(r.Context(), tok)
			if err == nil && user == "" {
				err = fmt.Errorf("risk: authenticator returned an empty user: %w", ErrInvalidToken)
			}
		}
		if a.o.observer != nil {
			a.observe(r.Context(), start, err)
		}
		if err != nil {
			a.fail(w, r, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(WithUser(r.Context(), user)))
	})
}

func (a *auth) fail(w http.ResponseWriter, r *http.Request, err error) {
	if a.o.onAuthFailure != nil {
		a.o.onAuthFailure(r.Context(), r, err)
	}
	var reason string
	switch {
	case errors.Is(err, ErrNoToken):
		reason = "missing_token"
		w.Header().Set("WWW-Authenticate", `Bearer`)
	case errors.Is(err, ErrMalformedToken):
		reason = "malformed_token"
		w.Header().Set("WWW-Authenticate", `Bearer error="invalid_request"`)
	case errors.Is(err, ErrInvalidToken):
		reason = "invalid_token"
		w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
	default:
		a.o.logger.WarnContext(r.Context(), "risk: authenticator failed", "err", err)
		writeJSON(w, http.StatusServiceUnavailable, "unavailable", "")
		return
	}
	writeJSON(w, http.StatusUnauthorized, "unauthorized", reason)
}
