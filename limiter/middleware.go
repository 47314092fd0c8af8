package limiter

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// KeyFunc extracts the key to charge from a request (a user ID, a device
// ID, a client IP). An error means the request cannot be keyed; see
// [WithKeyFailurePolicy].
type KeyFunc func(*http.Request) (string, error)

// HeaderKey keys by a request header (a user or device ID set by an
// authenticating proxy or by earlier middleware); a missing header is an
// error.
func HeaderKey(name string) KeyFunc {
	return func(r *http.Request) (string, error) {
		v := r.Header.Get(name)
		if v == "" {
			return "", fmt.Errorf("missing header %s", name)
		}
		return v, nil
	}
}

// ConstKey charges every request to one key (a global limit).
func ConstKey(key string) KeyFunc {
	return func(*http.Request) (string, error) { return key, nil }
}

// Rule is one limit applied by [NewMiddleware].
type Rule struct {
	// Name identifies the rule in responses and hooks. Default "rule<i>".
	Name string
	// Limiter decides. Required.
	Limiter Limiter
	// Key keys the request. Default [RemoteAddrKey].
	Key KeyFunc
	// Cost is the number of events a request spends. Default 1.
	Cost int
}

// MiddlewareOption configures [NewMiddleware].
type MiddlewareOption func(*mwOptions)

type mwOptions struct {
	keyPolicy FailurePolicy
	onError   func(r *http.Request, rule string, err error)
	onDenied  func(r *http.Request, rule string, res Result)
	observer  Observer
}

// WithKeyFailurePolicy says what the middleware does when a rule's key
// function fails: [FailClosed] (default) answers 500 with a JSON error and
// spends nothing; [FailOpen] (or [FallbackLocal], treated alike) skips that
// rule for the request and applies the others.
func WithKeyFailurePolicy(p FailurePolicy) MiddlewareOption {
	return func(o *mwOptions) { o.keyPolicy = p }
}

// WithOnError sets a hook for key-function and store errors (the error
// wraps [ErrKey] or [ErrUnavailable]). Default: none.
func WithOnError(f func(r *http.Request, rule string, err error)) MiddlewareOption {
	return func(o *mwOptions) { o.onError = f }
}

// WithOnDenied sets a hook called for each 429. Default: none.
func WithOnDenied(f func(r *http.Request, rule string, res Result)) MiddlewareOption {
	return func(o *mwOptions) { o.onDenied = f }
}

// WithMiddlewareObserver reports every request's limiting decision to o
// as the stage "limiter.http" (see [StageHTTP] for the outcomes; Name is
// the refusing or failing rule), synchronously, with the request's
// context, before the response is written or the next handler runs. A nil
// o is ignored. Default: none.
func WithMiddlewareObserver(o Observer) MiddlewareOption {
	return func(opts *mwOptions) {
		if o != nil {
			opts.observer = o
		}
	}
}

// Response header names.
const (
	HeaderRetryAfter = "Retry-After"
	HeaderLimit      = "RateLimit-Limit"
	HeaderRemaining  = "RateLimit-Remaining"
	HeaderReset      = "RateLimit-Reset"
)

// ErrorBody is the JSON body of the middleware's 429 and 5xx answers.
type ErrorBody struct {
	Error        string `json:"error"`                    // "rate_limited", "limiter_unavailable", "limiter_key_error"
	Rule         string `json:"rule,omitempty"`           // the refusing or failing rule
	RetryAfterMS int64  `json:"retry_after_ms,omitempty"` // for rate_limited
}

// NewMiddleware returns HTTP middleware applying rules in order through
// [Chain]: a request refused by any rule spends nothing in the others.
//
// For each request it first computes every rule's key; a key error is
// handled by [WithKeyFailurePolicy] before any budget is spent. Then:
//   - all rules allow: RateLimit-Limit, RateLimit-Remaining and
//     RateLimit-Reset (seconds, rounded up) of the tightest rule are set and
//     next is called;
//   - a rule refuses: 429 with Retry-After (seconds, at least 1), the
//     RateLimit-* headers of that rule and an [ErrorBody] JSON;
//   - a rule's store fails (its limiter is [FailClosed]; other policies
//     decide locally and do not reach here): 503 with an [ErrorBody]
//     JSON, nothing spent in the other rules.
//
// It returns an error for an empty rule list or a rule without a limiter or
// with a negative cost.
func NewMiddleware(rules []Rule, opts ...MiddlewareOption) (func(http.Handler) http.Handler, error) {
	if len(rules) == 0 {
		return nil, fmt.Errorf("%w: middleware needs at least one rule", ErrInvalidConfig)
	}
	var o mwOptions
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	rs := make([]Rule, len(rules))
	for i, r := range rules {
		if r.Limiter == nil {
			return nil, fmt.Errorf("%w: rule %d has no limiter", ErrInvalidConfig, i)
		}
		if r.Cost < 0 {
			return nil, fmt.Errorf("%w: rule %d has cost %d", ErrInvalidConfig, i, r.Cost)
		}
		if r.Cost == 0 {
			r.Cost = 1
		}
		if r.Key == nil {
			r.Key = RemoteAddrKey
		}
		if r.Name == "" {
			r.Name = "rule" + strconv.Itoa(i)
		}
		rs[i] = r
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			ctx := req.Context()
			var start time.Time
			if o.observer != nil {
				start = time.Now()
			}
			steps := make([]Step, 0, len(rs))
			names := make([]string, 0, len(rs))
			for _, r := range rs {
				key, err := r.Key(req)
				if err != nil {
					err = fmt.Errorf("%w: rule %s: %w", ErrKey, r.Name, err)
					if o.onError != nil {
						o.onError(req, r.Name, err)
					}
					if o.keyPolicy == FailClosed {
						if o.observer != nil {
							observeHTTP(ctx, o.observer, start, OutcomeKeyError, r.Name, err)
						}
						writeJSON(w, http.StatusInternalServerError, ErrorBody{Error: "limiter_key_error", Rule: r.Name})
						return
					}
					continue
				}
				steps = append(steps, Step{Limiter: r.Limiter, Key: key, N: r.Cost})
				names = append(names, r.Name)
			}
			if len(steps) == 0 { // every key failed open
				if o.observer != nil {
					observeHTTP(ctx, o.observer, start, OutcomeOK, "", nil)
				}
				next.ServeHTTP(w, req)
				return
			}
			res, idx, err := Chain(ctx, 1, steps...)
			if err != nil {
				name := names[idx]
				if o.onError != nil {
					o.onError(req, name, err)
				}
				if o.observer != nil {
					observeHTTP(ctx, o.observer, start, OutcomeError, name, err)
				}
				writeJSON(w, http.StatusServiceUnavailable, ErrorBody{Error: "limiter_unavailable", Rule: name})
				return
			}
			setRateHeaders(w.Header(), res)
			if idx >= 0 {
				name := names[idx]
				if o.onDenied != nil {
					o.onDenied(req, name, res)
				}
				if o.observer != nil {
					observeHTTP(ctx, o.observer, start, OutcomeLimited, name, nil)
				}
				w.Header().Set(HeaderRetryAfter, strconv.FormatInt(ceilSeconds(res.RetryAfter, 1), 10))
				writeJSON(w, http.StatusTooManyRequests, ErrorBody{
					Error: "rate_limited", Rule: name, RetryAfterMS: max(res.RetryAfter.Milliseconds(), 1),
				})
				return
			}
			if o.observer != nil {
				observeHTTP(ctx, o.observer, start, OutcomeOK, "", nil)
			}
			next.ServeHTTP(w, req)
		})
	}, nil
}

func setRateHeaders(h http.Header, r Result) {
	h.Set(HeaderLimit, strconv.Itoa(r.Limit))
	h.Set(HeaderRemaining, strconv.Itoa(r.Remaining))
	h.Set(HeaderReset, strconv.FormatInt(ceilSeconds(r.ResetAfter, 0), 10))
}

func ceilSeconds(d time.Duration, floor int64) int64 {
	s := int64((d + time.Second - 1) / time.Second)
	return max(s, floor)
}

func writeJSON(w http.ResponseWriter, code int, body ErrorBody) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(body)
}
