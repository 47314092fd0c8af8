package risk

import (
	"fmt"
	"net/http"
)

// NewMiddleware returns HTTP middleware that runs c on each request and
// enforces the decision:
//
//	allow      → next, with the decision in the context ([DecisionFrom])
//	deny       → 403 {"error":"forbidden","reason":<code>}
//	throttled  → 429 {"error":"too_many_requests","reason":<code>} + Retry-After
//	challenge  → 403 {"error":"challenge","reason":<code>} + X-Risk-Challenge
//	             (or the [WithChallengeHandler] handler)
//	failure    → 503 {"error":"unavailable"} (under FailClosed)
//
// The subject is the user from [UserFrom] (so put the [NewAuth] middleware
// in front), the IP from the [IPResolver] (default: TCP peer only) and the
// device from the X-Device-ID header, as sent (the built-in rules deny one
// that is not [ValidDeviceID]: 403 reason [ReasonInvalidDevice]); see
// [WithSubjectFunc].
//
// Options: [WithIPResolver], [WithDeviceHeader], [WithSubjectFunc],
// [WithChallengeHandler] (each a [MiddlewareOption]); a nil option is
// ignored. A nil checker or a bad option fails with [ErrInvalidConfig].
// Failure policy, dry run, hooks and logging belong to the Checker (it
// logs the rule failure behind a 503). The middleware is safe for
// concurrent use.
func NewMiddleware(c *Checker, opts ...MiddlewareOption) (func(http.Handler) http.Handler, error) {
	if c == nil {
		return nil, fmt.Errorf("risk: nil checker: %w", ErrInvalidConfig)
	}
	o, err := buildOptions(opts, MiddlewareOption.applyMiddleware)
	if err != nil {
		return nil, err
	}
	if o.ipResolver == nil {
		o.ipResolver = &IPResolver{}
	}
	m := &middleware{c: c, o: o}
	return m.handle, nil
}

// middleware is the state of one [NewMiddleware] middleware.
type middleware struct {
	c *Checker
	o options
}

// attestHeader is the header the default subject's AttestToken comes from.
const attestHeader = "X-Attestation"

// subject returns the subject the middleware checks for r.
func (m *middleware) subject(r *http.Request) (Subject, error) {
	if m.o.subjectFunc != nil {
		return m.o.subjectFunc(r)
	}
	var s Subject
	s.UserID, _ = UserFrom(r.Context())
	s.IP = m.o.ipResolver.ClientIP(r)
	if m.o.deviceHeader != "" {
		// Passed on as sent: the rules deny an invalid device ID
		// (ReasonInvalidDevice) before it reaches Redis.
		s.DeviceID = r.Header.Get(m.o.deviceHeader)
	}
	s.AttestToken = r.Header.Get(attestHeader)
	return s, nil
}

// handle wraps next.
func (m *middleware) handle(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, err := m.subject(r)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, "bad_request", "subject")
			return
		}
		d, err := m.c.Check(r.Context(), s)
		if err != nil {
			// FailClosed (the Checker logged the rule failure), or the
			// request's context ended.
			writeJSON(w, http.StatusServiceUnavailable, "unavailable", "")
			return
		}
		r = r.WithContext(withDecision(r.Context(), d))
		switch d.Action {
		case Deny:
			if d.RetryAfter > 0 {
				w.Header().Set("Retry-After", retryAfterSeconds(d.RetryAfter))
			}
			if d.Throttled {
				writeJSON(w, http.StatusTooManyRequests, "too_many_requests", d.Reason)
			} else {
				writeJSON(w, http.StatusForbidden, "forbidden", d.Reason)
			}
		case Challenge:
			if m.o.challenge != nil {
				m.o.challenge(w, r, next, d)
				return
			}
			w.Header().Set("X-Risk-Challenge", d.Reason)
			writeJSON(w, http.StatusForbidden, "challenge", d.Reason)
		default:
			next.ServeHTTP(w, r)
		}
	})
}
