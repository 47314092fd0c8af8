package breaker

import "errors"

// ErrOpen is returned by [Breaker.Execute], [Do] and [Breaker.Allow] when the
// breaker is open: the call was refused without running.
var ErrOpen = errors.New("breaker: open")

// ErrTooManyProbes is returned by [Breaker.Execute], [Do] and [Breaker.Allow]
// when the breaker is half-open and every probe slot (see [WithProbeLimit]) is
// held by a call still in flight: the call was refused without running.
var ErrTooManyProbes = errors.New("breaker: too many probes")

// ErrNilFunc is returned by [Breaker.Execute] and [Do] when fn is nil. Nothing
// is counted.
var ErrNilFunc = errors.New("breaker: nil function")

// ErrInvalidConfig is wrapped by every error [New] returns, so a caller can
// tell bad configuration apart with errors.Is.
var ErrInvalidConfig = errors.New("breaker: invalid config")
