package breaker

import (
	"context"
	"time"

	"github.com/seckillkit/seckill/internal/observe"
)

// Stages and outcomes reported to [WithObserver]. They are stable (metric
// labels); a rename is a breaking change.
//
//	stage          outcome                      when
//	breaker.call   ok | failure | ignored |     after each Execute, Do or
//	               rejected                     Allow+done; Name = breaker name
//	breaker.state  closed | half_open | open    gauge, Value 0 | 1 | 2 (the
//	                                            State); once at New and after
//	                                            every transition
//
// A call's Duration runs from Execute (or Allow) to the end of the
// protected function (to done for Allow), on the breaker's clock; a
// rejected call's Duration is the time the refusal took. Calls report the
// caller's ctx (Allow, which takes none, reports context.Background()); the
// state gauge reports the ctx [WithOnStateChange] gets for the transition.
// Err is never set: a failure is the protected function's business, and
// the breaker's refusals are the outcome "rejected".
const (
	StageCall  = "breaker.call"
	StageState = "breaker.state"
)

// The outcomes of [StageCall], as in the table above.
const (
	outcomeOK       = observe.OK
	outcomeFailure  = "failure"
	outcomeIgnored  = "ignored"
	outcomeRejected = "rejected"
)

// stateOutcome is the snake-case label of a state for the state gauge.
func stateOutcome(s State) string {
	switch s {
	case Closed:
		return "closed"
	case HalfOpen:
		return "half_open"
	case Open:
		return "open"
	}
	return s.String()
}

func callOutcome(o Outcome) string {
	switch o {
	case Success:
		return outcomeOK
	case Ignore:
		return outcomeIgnored
	}
	return outcomeFailure
}

// observeCall reports one call that started at start (b.now() reading).
// Callers check b.obs != nil first.
func (b *Breaker) observeCall(ctx context.Context, outcome string, start int64) {
	b.obs.Observe(ctx, observe.Event{Stage: StageCall, Outcome: outcome, Name: b.name,
		Duration: durationSince(b.now(), start)})
}

func (b *Breaker) observeState(ctx context.Context, to State) {
	b.obs.Observe(ctx, observe.Event{Stage: StageState, Outcome: stateOutcome(to),
		Name: b.name, Gauge: true, Value: float64(to)})
}

func durationSince(now, start int64) time.Duration {
	if now < start {
		return 0
	}
	return time.Duration(now - start)
}
