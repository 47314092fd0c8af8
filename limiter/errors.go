package limiter

import (
	"errors"

	"github.com/seckillkit/seckill/internal/lifecycle"
)

// Sentinel errors. Every error returned by this package wraps one of them
// (test with [errors.Is]); infrastructure failures also wrap the cause.
var (
	// ErrInvalidConfig is returned by constructors given a bad setting
	// (negative or NaN rate, burst < 1 with a positive rate, nil client, …).
	ErrInvalidConfig = errors.New("limiter: invalid config")

	// ErrInvalidN is returned when a cost n is < 1, or larger than the
	// limit (burst) so that it could never be allowed, or (for a Redis
	// limiter's refund) above 2^53-1, which its script cannot hold exactly.
	ErrInvalidN = errors.New("limiter: invalid n")

	// ErrUnavailable wraps a failure of the shared store (Redis): a network
	// error, a timeout, a closed server. It is returned only under
	// [FailClosed]; the other policies answer locally and report the
	// failure through [WithOnFailure].
	ErrUnavailable = errors.New("limiter: store unavailable")

	// ErrBadReply is returned (wrapped in ErrUnavailable) when Redis answers
	// a script with a reply of an unexpected shape.
	ErrBadReply = errors.New("limiter: unexpected reply from redis")

	// ErrLimited is the denial translated into an error by wrappers that
	// cannot return a [Result]: the HTTP middleware's error hook and
	// [Wait]-style calls whose reservation can never be satisfied.
	ErrLimited = errors.New("limiter: rate limited")

	// ErrWouldExceedDeadline is returned by [TokenBucket.Wait] when the wait
	// needed would end after the context's deadline. Nothing is spent; the
	// error also matches [context.DeadlineExceeded].
	ErrWouldExceedDeadline = errors.New("limiter: wait would exceed context deadline")

	// ErrRunning is returned by [CoarseClock.Run] when the clock already
	// runs. It is the sentinel every seckill package re-exports, so one
	// errors.Is matches "already running" whichever package answered.
	ErrRunning = lifecycle.ErrRunning

	// ErrClosed is returned by [CoarseClock.Run] after [CoarseClock.Close].
	// It is the sentinel every seckill package re-exports.
	ErrClosed = lifecycle.ErrClosed

	// ErrKey is wrapped around the error of a middleware key function.
	ErrKey = errors.New("limiter: key function failed")
)

func isInvalidN(err error) bool { return err != nil && errors.Is(err, ErrInvalidN) }
