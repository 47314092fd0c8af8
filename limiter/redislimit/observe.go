package redislimit

import (
	"context"
	"time"

	"github.com/seckillkit/seckill/internal/observe"
	"github.com/seckillkit/seckill/limiter"
)

// StageAllow is the stage reported to an [observe.Observer] ([WithObserver])
// for each AllowN of a Redis limiter, with Name = [WithName]. It and its
// outcomes are stable (metric labels); a rename is a breaking change.
// Activity is always empty: a limiter does not know what its key means.
// Refunds are not reported.
//
//	stage          outcome             when
//	limiter.allow  ok                  the limiter allowed
//	               limited             it refused
//	               fallback            Redis failed and the failure policy
//	                                   allowed (FailOpen, FallbackLocal)
//	               fallback_limited    Redis failed and the local fallback
//	                                   refused
//	               error               no decision: FailClosed, a bad n, the
//	                                   caller's ctx ended (Err set)
//
// The middleware's stage is [limiter.StageHTTP].
const StageAllow = "limiter.allow"

// The outcomes of the table above.
const (
	outcomeOK              = observe.OK
	outcomeLimited         = "limited"
	outcomeFallback        = "fallback"
	outcomeFallbackLimited = "fallback_limited"
	outcomeError           = observe.Error
)

// observeAllow reports one decision of a Redis limiter. Callers check
// b.obs != nil first.
func (b *redisBase) observeAllow(ctx context.Context, start time.Time, r limiter.Result, err error) {
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
