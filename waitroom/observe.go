package waitroom

import (
	"context"
	"errors"
	"time"

	"github.com/seckillkit/seckill/internal/observe"
)

// Stages reported to [WithObserver].
const (
	stageJoin   = "waitroom.join"
	stagePoll   = "waitroom.poll"
	stageAdmit  = "waitroom.admit"
	stageVerify = "waitroom.verify"
)

var outcomes = [...]struct {
	err     error
	outcome string
}{
	{ErrInvalidArgument, "invalid_argument"},
	{ErrMalformed, "malformed"},
	{ErrInvalidSignature, "invalid_signature"},
	{ErrExpired, "expired"},
	{ErrWrongUser, "wrong_user"},
	{ErrNotAdmitted, "not_admitted"},
}

func outcomeOf(err error) string {
	if err == nil {
		return observe.OK
	}
	for _, o := range outcomes {
		if errors.Is(err, o.err) {
			return o.outcome
		}
	}
	return observe.Error
}

// report sends one event when an observer is set.
func (r *Room) report(ctx context.Context, stage, sale string, start time.Time, value float64, err error) {
	if r.opts.observer == nil {
		return
	}
	e := observe.Event{Stage: stage, Outcome: outcomeOf(err), Activity: sale, Duration: time.Since(start), Value: value}
	if e.Outcome == observe.Error {
		e.Err = err
	}
	r.opts.observer.Observe(ctx, e)
}
