package limiter

import (
	"context"
	"time"

	"github.com/seckillkit/seckill/internal/observe"
)

// StageHTTP is the stage the middleware reports to an [observe.Observer]
// ([WithObserver]), once per request, timing its decision only (not the
// next handler), before the response or the next handler. It and its
// outcomes are stable (metric labels); a rename is a breaking change.
// Activity is always empty: a limiter does not know what its key means.
//
//	stage          outcome             when
//	limiter.http   ok                  the middleware let the request through
//	               limited             a rule answered 429 (Name = rule)
//	               error               a rule's store failed: 503 (Name = rule,
//	                                   Err set)
//	               key_error           a rule's key function failed under
//	                                   FailClosed: 500 (Name = rule, Err set)
//
// The Redis limiters of package redislimit report their decisions as the
// stage "limiter.allow" (redislimit.StageAllow).
const StageHTTP = "limiter.http"

// The outcomes of the table above.
const (
	outcomeOK       = observe.OK
	outcomeLimited  = "limited"
	outcomeError    = observe.Error
	outcomeKeyError = "key_error"
)

// observeHTTP reports one request of the middleware.
func observeHTTP(ctx context.Context, o observe.Observer, start time.Time, outcome, rule string, err error) {
	o.Observe(ctx, observe.Event{Stage: StageHTTP, Outcome: outcome, Name: rule, Duration: time.Since(start), Err: err})
}
