package risk

import (
	"context"
	"errors"
	"time"

	"github.com/seckillkit/seckill/internal/observe"
)

// Stages reported to [WithObserver], one event per call. They are stable
// (metric labels); a rename is a breaking change.
//
//	stage       outcome                                  Name
//	risk.check  allow | challenge | deny | error         the deciding rule
//	                                                     (Decision.Rule; ""
//	                                                     on a plain allow)
//	risk.auth   ok | missing_token | malformed_token |   ""
//	            invalid_token | error
//
// risk.check is one [Checker.Check]; in dry-run mode the outcome is the
// would-be action (what [WithOnDecision] sees), not the Allow returned.
// "error" means no decision (FailClosed, or the caller's ctx ended) and
// carries Err. risk.auth is one request through the [NewAuth] middleware,
// timed up to the
// decision and reported before the next handler runs; "error" is an
// authenticator failure (503). Activity is empty: a [Subject] names no
// sale.
const (
	StageCheck = "risk.check"
	StageAuth  = "risk.auth"
)

// observeCheck reports one Check; callers check c.o.observer != nil first.
func (c *Checker) observeCheck(ctx context.Context, start time.Time, d Decision, err error) {
	e := observe.Event{Stage: StageCheck, Name: d.Rule, Duration: time.Since(start)}
	switch {
	case err != nil:
		e.Outcome, e.Err, e.Name = observe.Error, err, ""
	case d.DryRun:
		e.Outcome = d.DryRunAction.String()
	default:
		e.Outcome = d.Action.String()
	}
	c.o.observer.Observe(ctx, e)
}

// authOutcome is the outcome of an authenticated request that ended with err.
func authOutcome(err error) string {
	switch {
	case err == nil:
		return observe.OK
	case errors.Is(err, ErrNoToken):
		return "missing_token"
	case errors.Is(err, ErrMalformedToken):
		return "malformed_token"
	case errors.Is(err, ErrInvalidToken):
		return "invalid_token"
	}
	return observe.Error
}

func (a *auth) observe(ctx context.Context, start time.Time, err error) {
	e := observe.Event{Stage: StageAuth, Outcome: authOutcome(err), Duration: time.Since(start)}
	if e.Outcome == observe.Error {
		e.Err = err
	}
	a.o.observer.Observe(ctx, e)
}
