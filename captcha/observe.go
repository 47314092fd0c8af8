package captcha

import (
	"context"
	"errors"
	"time"

	"github.com/seckillkit/seckill/internal/observe"
)

// Stages reported to [WithObserver], one event per call. They are stable
// (metric labels); a rename is a breaking change.
//
//	stage           outcome
//	captcha.create  ok | error
//	captcha.verify  ok | not_found | wrong_answer | too_many_attempts |
//	                wrong_user | error
//
// A refusal's outcome is the snake-case name of its sentinel; "error" (a
// generator or Redis failure, bad input to Generate) carries Err. Activity
// and Name are empty: a challenge belongs to no activity. Duration is
// measured on the process's monotonic clock (Generate includes drawing the
// image).
const (
	StageCreate = "captcha.create"
	StageVerify = "captcha.verify"
)

func outcomeOf(err error) string {
	switch {
	case err == nil:
		return observe.OK
	case errors.Is(err, ErrNotFound):
		return "not_found"
	case errors.Is(err, ErrWrongAnswer):
		return "wrong_answer"
	case errors.Is(err, ErrTooManyAttempts):
		return "too_many_attempts"
	case errors.Is(err, ErrWrongUser):
		return "wrong_user"
	}
	return observe.Error
}

func (s *Store) report(ctx context.Context, stage string, start time.Time, err error) {
	e := observe.Event{Stage: stage, Outcome: outcomeOf(err), Duration: time.Since(start)}
	if e.Outcome == observe.Error {
		e.Err = err
	}
	s.opts.observer.Observe(ctx, e)
}
