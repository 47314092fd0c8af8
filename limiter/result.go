package limiter

import (
	"context"
	"time"
)

// Limiter is the contract shared by the keyed limiters of this package
// ([Keyed], [DryRun], and the Redis limiters of package redislimit:
// redislimit.SlidingWindow, redislimit.Bucket) and consumed by
// [Chain] and [NewMiddleware]. Implement it to plug in another store.
//
// AllowN reports whether n events for key may happen now and, if so,
// spends them. A refusal is a Result with Allowed false and a nil error; a
// non-nil error means the decision could not be made (see [FailurePolicy]).
// n must be in [1, Limit]; otherwise AllowN returns an error wrapping
// [ErrInvalidArgument] and spends nothing.
type Limiter interface {
	AllowN(ctx context.Context, key string, n int) (Result, error)
}

// Refunder is implemented by limiters that can give back n events that
// were allowed but not used, so that a later refusal in a [Chain] does not
// leave earlier budgets spent. A refund never raises the budget above its
// limit. All limiters of this package implement it.
type Refunder interface {
	RefundN(ctx context.Context, key string, n int) error
}

// Result is the outcome of one decision.
type Result struct {
	// Allowed reports whether the events were allowed (and spent).
	Allowed bool

	// Limit is the most events the key may have at once: the burst of a
	// bucket, the per-window limit of a window.
	Limit int

	// Remaining is how many more events would be allowed right now after
	// this decision (never negative).
	Remaining int

	// RetryAfter is, for a refusal, how long until the same request could
	// be allowed if nothing else is spent meanwhile; zero when allowed.
	RetryAfter time.Duration

	// ResetAfter is how long until the key is back at its full limit
	// (Remaining == Limit) if nothing else is spent.
	ResetAfter time.Duration

	// Degraded reports that the decision was made by the failure policy
	// (fail-open or local fallback) because the store failed.
	Degraded bool

	// DryRunRefused is set by [DryRun] when the wrapped limiter refused (or
	// failed) and the request was let through; nothing was spent for it.
	DryRunRefused bool
}

// FailurePolicy says what a Redis limiter answers when Redis fails (network
// error, timeout, closed server, unexpected reply). Whatever the policy,
// each failure is reported to the limiter's redislimit.WithOnFailure hook
// and its logger. [NewMiddleware] reuses it for key failures
// ([WithKeyFailurePolicy]).
type FailurePolicy int

const (
	// FailClosed refuses: AllowN returns Result{Allowed: false} and an error
	// wrapping [ErrUnavailable]. This is the default: a broken limiter never
	// silently lets a flash crowd through.
	FailClosed FailurePolicy = iota
	// FailOpen allows: AllowN returns Result{Allowed: true, Degraded: true}
	// and a nil error. Budgets are not enforced while Redis is down.
	FailOpen
	// FallbackLocal decides with an in-process limiter (see redislimit.WithFallback):
	// AllowN returns its Result with Degraded set and a nil error (or the
	// fallback's own error).
	FallbackLocal
)

// String returns the policy's name.
func (p FailurePolicy) String() string {
	switch p {
	case FailClosed:
		return "fail-closed"
	case FailOpen:
		return "fail-open"
	case FallbackLocal:
		return "fallback-local"
	default:
		return "unknown"
	}
}
