package limiter

import (
	"context"
	"time"

	"github.com/seckillkit/seckill/observe"
)

// Stages and outcomes reported to an [observe.Observer]. They are stable (metric
// labels); a rename is a breaking change.
//
//	stage          outcome             when
//	limiter.allow  ok                  a Redis limiter allowed (Name = WithName)
//	               limited             it refused
//	               fallback            Redis failed and the failure policy
//	                                   allowed (FailOpen, FallbackLocal)
//	               fallback_limited    Redis failed and the local fallback
//	                                   refused
//	               error               no decision: FailClosed, a bad n, the
//	                                   caller's ctx ended (Err set)
//	limiter.http   ok                  the middleware let the request through
//	               limited             a rule answered 429 (Name = rule)
//	               error               a rule's store failed: 503 (Name = rule,
//	                                   Err set)
//	               key_error           a rule's key function failed under
//	                                   FailClosed: 500 (Name = rule, Err set)
//
// limiter.allow is reported by [SlidingWindow.AllowN] and
// [RedisBucket.AllowN] (refunds are not reported); limiter.http once per
// request by the middleware, timing its decision only (not the next
// handler), before the response or the next handler. Activity is always
// empty: a limiter does not know what its key means.
const (
	StageAllow = "limiter.allow"
	StageHTTP  = "limiter.http"
)

// The outcomes of the table above.
const (
	outcomeOK              = observe.OK
	outcomeLimited         = "limited"
	outcomeFallback        = "fallback"
	outcomeFallbackLimited = "fallback_limited"
	outcomeError           = observe.Error
	outcomeKeyError        = "key_error"
)

// observeAllow reports one decision of a Redis limiter. Callers check
// b.obs != nil first.
func (b *redisBase) observeAllow(ctx context.Context, start time.Time, r Result, err error) {
	e := observe.Event{Stage: StageAllow, Name: b.o.name, Duration: time.Since(start)}
	switch {
	case err != nil:
		e.Outcome, e.Err = outcomeError, err
	case r.Degraded && r.Allowed:
		e.Outcome = outcomeFallback
	case r.Degraded:
		e.Outcome = outcomeFallbackLimited
	case r.Allowed:
		e.Outcome = outcomeOK
	default:
		e.Outcome = outcomeLimited
	}
	b.obs.Observe(ctx, e)
}

// observeHTTP reports one request of the middleware.
func observeHTTP(ctx context.Context, o observe.Observer, start time.Time, outcome, rule string, err error) {
	o.Observe(ctx, observe.Event{Stage: StageHTTP, Outcome: outcome, Name: rule, Duration: time.Since(start), Err: err})
}
