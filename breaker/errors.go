package breaker

import (
	"errors"
	"fmt"
)

// ErrRefused is the umbrella of the breaker's refusals: [ErrOpen] and
// [ErrTooManyProbes] both match it, so one errors.Is(err, ErrRefused) tells
// "refused without running" apart from the protected function's own errors.
var ErrRefused = errors.New("breaker: refused")

// ErrOpen is returned by [Breaker.Execute], [Do] and [Breaker.Allow] when the
// breaker is open: the call was refused without running. It matches
// [ErrRefused].
var ErrOpen error = &refusal{"breaker: open"}

// ErrTooManyProbes is returned by [Breaker.Execute], [Do] and [Breaker.Allow]
// when the breaker is half-open and every probe slot (see [WithProbeLimit]) is
// held by a call still in flight: the call was refused without running. It
// matches [ErrRefused].
var ErrTooManyProbes error = &refusal{"breaker: too many probes"}

// refusal is a sentinel that wraps [ErrRefused] and keeps its own message.
type refusal struct{ msg string }

func (e *refusal) Error() string { return e.msg }
func (e *refusal) Unwrap() error { return ErrRefused }

// ErrInvalidArgument is wrapped by the error of a call given a bad argument:
// [Breaker.Execute] and [Do] with a nil fn. Nothing is counted. It never
// matches [ErrRefused].
var ErrInvalidArgument = errors.New("breaker: invalid argument")

// ErrInvalidConfig is wrapped by every error [New] returns, so a caller can
// tell bad configuration apart with errors.Is.
var ErrInvalidConfig = errors.New("breaker: invalid configuration")

// errNilFunc is the error of Execute and Do for a nil fn.
var errNilFunc = fmt.Errorf("%w: nil function", ErrInvalidArgument)
