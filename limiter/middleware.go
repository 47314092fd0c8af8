package limiter

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/seckillkit/seckill/internal/observe"
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

type mwOptions struct {
	keyPolicy FailurePolicy
	onError   func(r *http.Request, rule string, err error)
	onDenied  func(r *http.Request, rule string, res Result)
	observer  observe.Observer
}

// WithKeyFailurePolicy says what the middleware does when a rule's key
// function fails: [FailClosed] (default) answers 500 with a JSON error and
// spends nothing; [FailOpen] (or [FallbackLocal], treated alike) skips that
// rule for the request and applies the others. Another value is an error
// wrapping [ErrInvalidConfig].
func WithKeyFailurePolicy(p FailurePolicy) MiddlewareOption {
	return mwOpt(func(o *mwOptions) { o.keyPolicy = p })
}

// WithOnError sets a hook for key-function and store errors: the error
// wraps [ErrInvalidArgument] (the key function failed) or [ErrUnavailable]
// (the rule's store failed). The HTTP hooks take the request, whose
// Context() is the context of the call. Default: none.
func WithOnError(f func(r *http.Request, rule string, err error)) MiddlewareOption {
	return mwOpt(func(o *mwOptions) { o.onError = f })
}

// WithOnDenied sets a hook called for each 429, with the request (its
// Context() is the context of the call), the refusing rule and its Result.
// Default: none.
func WithOnDenied(f func(r *http.Request, rule string, res Result)) MiddlewareOption {
	return mwOpt(func(o *mwOptions) { o.onDenied = f })
}

// WithObserver reports every request's limiting decision to o as the
// stage "limiter.http" (see [StageHTTP] for the outcomes; Name is
// the refusing or failing rule), synchronously, with the request's
// context, before the response is written or the next handler runs. A nil
// o is ignored. Default: none.
func WithObserver(o observe.Observer) MiddlewareOption {
	return mwOpt(func(opts *mwOptions) {
		if o != nil {
			opts.observer = o
		}
	})
}

// The response headers the middleware sets (see [NewMiddleware]).
const (
	headerRetryAfter = "Retry-After"
	headerLimit      = "RateLimit-Limit"
	headerRemaining  = "RateLimit-Remaining"
	headerReset      = "RateLimit-Reset"
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
// It returns an error wrapping [ErrInvalidConfig] for an empty rule list,
// a rule without a limiter or with a negative cost, or an unknown key
// failure policy. The middleware shape, a constructor returning
// (func(http.Handler) http.Handler, error), is the library's one (see
// docs/ARCHITECTURE.md, "Constructors and options").
func NewMiddleware(rules []Rule, opts ...MiddlewareOption) (func(http.Handler) http.Handler, error) {
	var o mwOptions
	for _, opt := range opts {
		if opt != nil {
			opt.applyMiddleware(&o)
		}
	}
	switch o.keyPolicy {
	case FailClosed, FailOpen, FallbackLocal:
	default:
		return nil, fmt.Errorf("%w: unknown key failure policy %d", ErrInvalidConfig, int(o.keyPolicy))
	}
	rs, err := normalizeRules(rules)
	if err != nil {
		return nil, err
	}
	m := &middleware{rules: rs, o: o}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) { m.serve(w, req, next) })
	}, nil
}

// normalizeRules checks rules and fills in their defaults.
func normalizeRules(rules []Rule) ([]Rule, error) {
	if len(rules) == 0 {
		return nil, fmt.Errorf("%w: middleware needs at least one rule", ErrInvalidConfig)
	}
	rs := make([]Rule, len(rules))
	for i, r := range rules {
		if isNil(r.Limiter) {
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
	return rs, nil
}

// middleware is the handler state built by [NewMiddleware].
type middleware struct {
	rules []Rule
	o     mwOptions
}

// serve decides one request: keys, then the chain, then the answer.
func (m *middleware) serve(w http.ResponseWriter, req *http.Request, next http.Handler) {
	var start time.Time
	if m.o.observer != nil {
		start = time.Now()
	}
	steps, names, ok := m.keySteps(w, req, start)
	if !ok {
		return
	}
	if len(steps) == 0 { // every key failed open
		m.observe(req, start, outcomeOK, "", nil)
		next.ServeHTTP(w, req)
		return
	}
	res, idx, err := Chain(req.Context(), 1, steps...)
	switch {
	case err != nil:
		m.unavailable(w, req, start, names[idx], err)
	case idx >= 0:
		setRateHeaders(w.Header(), res)
		m.denied(w, req, start, names[idx], res)
	default:
		setRateHeaders(w.Header(), res)
		m.observe(req, start, outcomeOK, "", nil)
		next.ServeHTTP(w, req)
	}
}

// keySteps computes every rule's key. A key error under [FailClosed]
// answers 500 and returns ok false; under the other policies the rule is
// skipped.
func (m *middleware) keySteps(w http.ResponseWriter, req *http.Request, start time.Time) (steps []Step, names []string, ok bool) {
	steps = make([]Step, 0, len(m.rules))
	names = make([]string, 0, len(m.rules))
	for _, r := range m.rules {
		key, err := r.Key(req)
		if err != nil {
			err = fmt.Errorf("%w: rule %s: key function: %w", ErrInvalidArgument, r.Name, err)
			if m.o.onError != nil {
				m.o.onError(req, r.Name, err)
			}
			if m.o.keyPolicy == FailClosed {
				m.observe(req, start, outcomeKeyError, r.Name, err)
				writeJSON(w, http.StatusInternalServerError, ErrorBody{Error: "limiter_key_error", Rule: r.Name})
				return nil, nil, false
			}
			continue
		}
		steps = append(steps, Step{Limiter: r.Limiter, Key: key, N: r.Cost})
		names = append(names, r.Name)
	}
	return steps, names, true
}

// unavailable answers 503 for a rule whose store failed.
func (m *middleware) unavailable(w http.ResponseWriter, req *http.Request, start time.Time, rule string, err error) {
	if m.o.onError != nil {
		m.o.onError(req, rule, err)
	}
	m.observe(req, start, outcomeError, rule, err)
	writeJSON(w, http.StatusServiceUnavailable, ErrorBody{Error: "limiter_unavailable", Rule: rule})
}

// denied answers 429 for the refusing rule.
func (m *middleware) denied(w http.ResponseWriter, req *http.Request, start time.Time, rule string, res Result) {
	if m.o.onDenied != nil {
		m.o.onDenied(req, rule, res)
	}
	m.observe(req, start, outcomeLimited, rule, nil)
	w.Header().Set(headerRetryAfter, strconv.FormatInt(ceilSeconds(res.RetryAfter, 1), 10))
	writeJSON(w, http.StatusTooManyRequests, ErrorBody{
		Error: "rate_limited", Rule: rule, RetryAfterMS: max(res.RetryAfter.Milliseconds(), 1),
	})
}

// observe reports the request's decision when an observer is set.
func (m *middleware) observe(req *http.Request, start time.Time, outcome, rule string, err error) {
	if m.o.observer != nil {
		observeHTTP(req.Context(), m.o.observer, start, outcome, rule, err)
	}
}

func setRateHeaders(h http.Header, r Result) {
	h.Set(headerLimit, strconv.Itoa(r.Limit))
	h.Set(headerRemaining, strconv.Itoa(r.Remaining))
	h.Set(headerReset, strconv.FormatInt(ceilSeconds(r.ResetAfter, 0), 10))
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
