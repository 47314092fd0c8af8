package limiter

import (
	"errors"

	"github.com/seckillkit/seckill/internal/lifecycle"
)

// Sentinel errors. Every error returned by this package wraps one of them
// (test with [errors.Is]); infrastructure failures also wrap the cause.
var (
	// ErrInvalidConfig is returned by constructors given a bad setting
	// (negative or NaN rate, burst < 1 with a positive rate, nil client,
	// nil logger, …).
	ErrInvalidConfig = errors.New("limiter: invalid configuration")

	// ErrInvalidArgument is returned for a bad argument to a call: a cost
	// n < 1, or larger than the limit (burst) so that it could never be
	// allowed, or (for a Redis limiter's refund) above 2^53-1, which its
	// script cannot hold exactly; a [Chain] step without a limiter; a
	// request the middleware's key function cannot key (passed to
	// [WithOnError]). Nothing is spent. It never matches [ErrRefused].
	ErrInvalidArgument = errors.New("limiter: invalid argument")

	// ErrUnavailable wraps a failure of the shared store (Redis): a network
	// error, a timeout, a closed server. It is returned only under
	// [FailClosed]; the other policies answer locally and report the
	// failure through their hook (redislimit.WithOnFailure). It never matches [ErrRefused].
	ErrUnavailable = errors.New("limiter: store unavailable")

	// ErrRefused is the umbrella of the limiter's refusals where a refusal
	// has to be an error (a decision API returns Result{Allowed: false}
	// and a nil error instead): [TokenBucket.WaitN] returns it when a
	// quota (rate 0) cannot cover n, and [ErrWouldExceedDeadline] wraps
	// it. Store failures, invalid input and cancelled contexts never match
	// it.
	ErrRefused = errors.New("limiter: refused")

	// ErrWouldExceedDeadline is returned by [TokenBucket.Wait] when the wait
	// needed would end after the context's deadline. Nothing is spent; the
	// error matches [ErrRefused] and also [context.DeadlineExceeded].
	ErrWouldExceedDeadline error = &refusal{"limiter: wait would exceed context deadline"}

	// ErrRunning is returned by [CoarseClock.Run] when the clock already
	// runs. It is the sentinel every seckill package re-exports, so one
	// errors.Is matches "already running" whichever package answered.
	ErrRunning = lifecycle.ErrRunning

	// ErrClosed is returned by [CoarseClock.Run] after [CoarseClock.Close].
	// It is the sentinel every seckill package re-exports.
	ErrClosed = lifecycle.ErrClosed
)

// refusal is a sentinel that wraps [ErrRefused] and keeps its own message.
type refusal struct{ msg string }

func (e *refusal) Error() string { return e.msg }
func (e *refusal) Unwrap() error { return ErrRefused }

func isInvalidArgument(err error) bool { return err != nil && errors.Is(err, ErrInvalidArgument) }
