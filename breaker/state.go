package breaker

import "strconv"

// State is the position of a [Breaker] in its state machine. The numeric
// values (Closed 0, HalfOpen 1, Open 2) are stable and ordered by severity,
// the same order as sony/gobreaker, so a metrics gauge can export them as is.
type State uint8

const (
	// Closed lets every call through and counts the results. It moves to Open
	// when a trip condition holds (see [WithConsecutiveFailures] and
	// [WithFailureRatio]).
	Closed State = iota
	// HalfOpen lets at most the probe limit ([WithProbeLimit]) of calls run at
	// once. Any failure reopens the breaker; the configured number of successes
	// ([WithSuccessesToClose]) closes it.
	HalfOpen
	// Open refuses every call with [ErrOpen] until the open timeout
	// ([WithOpenTimeout]) has passed, then becomes HalfOpen.
	Open
)

// String returns "closed", "open" or "half-open".
func (s State) String() string {
	switch s {
	case Closed:
		return "closed"
	case Open:
		return "open"
	case HalfOpen:
		return "half-open"
	default:
		return "state(" + strconv.Itoa(int(s)) + ")"
	}
}

// Outcome is how a finished call counts, as decided by the classifier
// ([WithClassifier]).
type Outcome uint8

const (
	// Success counts towards closing (half-open) and resets the run of
	// consecutive failures (closed).
	Success Outcome = iota
	// Failure counts towards tripping (closed) and reopens a half-open breaker.
	Failure
	// Ignore counts as neither: the call is forgotten, except that a probe's
	// slot is given back. By default context.Canceled is ignored, because a
	// caller that gave up says nothing about the dependency's health.
	Ignore
)

// String returns "success", "failure" or "ignore".
func (o Outcome) String() string {
	switch o {
	case Success:
		return "success"
	case Failure:
		return "failure"
	case Ignore:
		return "ignore"
	default:
		return "outcome(" + strconv.Itoa(int(o)) + ")"
	}
}

// Counts is a snapshot of a [Breaker]'s counters, for metrics and tests. It is
// a plain value; reading it never changes the counts.
type Counts struct {
	// State is the state when the snapshot was taken.
	State State
	// Successes, Failures and Ignored count finished calls of the current
	// period. In Closed that is the rolling window when one is configured
	// ([WithWindow] or [WithFailureRatio]) and otherwise everything since the
	// breaker last closed; in HalfOpen it is the probes of this half-open
	// period; in Open it is zero.
	Successes, Failures, Ignored uint64
	// ConsecutiveFailures is the current run of failures without a success in
	// Closed (exact under concurrency); zero in the other states.
	ConsecutiveFailures uint32
	// Probes is the number of probe calls (admitted while HalfOpen) still in
	// flight. It can be non-zero in any state: a probe that outlives its
	// half-open period keeps its slot until it returns, so that the probe
	// limit holds across periods.
	Probes int
	// Rejected is the number of calls refused with [ErrOpen] or
	// [ErrTooManyProbes] since [New]. It never resets.
	Rejected uint64
}

// Requests returns Successes + Failures + Ignored.
func (c Counts) Requests() uint64 { return c.Successes + c.Failures + c.Ignored }
