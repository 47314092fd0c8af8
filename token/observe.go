package token

import (
	"context"
	"errors"
	"time"

	"github.com/seckillkit/seckill/internal/observe"
)

// Stages reported to [WithObserver], one event per call, with Activity set
// to the call's activity. They are stable (metric labels); a rename is a
// breaking change.
//
//	stage          outcome
//	token.take     granted | held | empty | used | not_issued |
//	               invalid_argument | error
//	token.consume  ok | not_found | wrong_user | used | expired | malformed |
//	               invalid_argument | error
//	token.restore  ok | not_found | wrong_user | malformed |
//	               invalid_argument | error
//	token.verify   ok | malformed | unknown_key | invalid_signature |
//	               wrong_activity | wrong_user | not_yet_valid | expired |
//	               replayed | error
//
// A refusal's outcome is the snake-case name of its sentinel
// ([ErrWrongUser] → "wrong_user"); a bad activity or user ID
// ([ErrInvalidArgument], the caller's mistake) is "invalid_argument";
// "error" is anything else (Redis failure, bad reply, cancelled context),
// with Err set. Duration is measured on the process's monotonic clock.
const (
	StageTake    = "token.take"
	StageConsume = "token.consume"
	StageRestore = "token.restore"
	StageVerify  = "token.verify"
)

// statusOutcomes are the take outcomes by Status, snake case.
var statusOutcomes = [...]string{"granted", "empty", "held", "used", "not_issued"}

// outcomes maps each refusal sentinel, and ErrInvalidArgument, to its
// outcome, in the order outcomeOf tests them.
var outcomes = [...]struct {
	err     error
	outcome string
}{
	{ErrInvalidArgument, "invalid_argument"},
	{ErrMalformed, "malformed"},
	{ErrNotFound, "not_found"},
	{ErrWrongUser, "wrong_user"},
	{ErrUsed, "used"},
	{ErrExpired, "expired"},
	{ErrUnknownKey, "unknown_key"},
	{ErrInvalidSignature, "invalid_signature"},
	{ErrWrongActivity, "wrong_activity"},
	{ErrNotYetValid, "not_yet_valid"},
	{ErrReplayed, "replayed"},
}

// outcomeOf is the outcome of a call that returned err.
func outcomeOf(err error) string {
	if err == nil {
		return observe.OK
	}
	for _, r := range outcomes {
		if errors.Is(err, r.err) {
			return r.outcome
		}
	}
	return observe.Error
}

// report sends one event; callers check o != nil first.
func report(ctx context.Context, o observe.Observer, stage, outcome, activity string, start time.Time, err error) {
	e := observe.Event{Stage: stage, Outcome: outcome, Activity: activity, Duration: time.Since(start)}
	if outcome == observe.Error {
		e.Err = err
	}
	o.Observe(ctx, e)
}
