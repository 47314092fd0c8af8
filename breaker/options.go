package breaker

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/seckillkit/seckill/internal/observe"
)

// Clock is the source of "now". A breaker reads it to time the open state and,
// when a rolling window is configured, to place each result in a bucket.
// Only differences between readings are used, so any monotonic source works.
type Clock interface{ Now() time.Time }

// Option configures a [Breaker]; pass options to [New], the package's one
// constructor. Options are built only by this package's With… functions
// (the interface has an unexported method). A nil Option is ignored.
type Option interface{ apply(*options) }

// optionFunc is the one implementation of [Option].
type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

// Defaults used by [New] when the corresponding option is not given; each
// With… doc states its value.
const (
	defaultConsecutiveFailures = 5
	defaultOpenTimeout         = 5 * time.Second
	defaultProbeLimit          = 1
	defaultSuccessesToClose    = 1
	defaultWindow              = 10 * time.Second
	defaultWindowBuckets       = 10
)

const maxBuckets = 1024

type options struct {
	consecutive   int
	ratio         float64
	minRequests   int
	ratioSet      bool
	window        time.Duration
	buckets       int
	windowSet     bool
	openTimeout   time.Duration
	probeLimit    int
	successes     int
	classifier    func(error) Outcome
	classifierSet bool
	onStateChange func(ctx context.Context, name string, from, to State)
	observer      observe.Observer
	clock         Clock
	clockSet      bool
}

func defaultOptions() options {
	return options{
		consecutive: defaultConsecutiveFailures,
		window:      defaultWindow,
		buckets:     defaultWindowBuckets,
		openTimeout: defaultOpenTimeout,
		probeLimit:  defaultProbeLimit,
		successes:   defaultSuccessesToClose,
		classifier:  DefaultClassifier,
	}
}

// WithConsecutiveFailures trips the breaker when n calls in a row fail in the
// Closed state. The count is exact under concurrency: it is the number of
// failures since the last success in the order the results were recorded.
// n = 0 disables this condition (then [WithFailureRatio] must be given).
// Default: 5.
func WithConsecutiveFailures(n int) Option {
	return optionFunc(func(o *options) { o.consecutive = n })
}

// WithFailureRatio trips the breaker when, over the rolling window (see
// [WithWindow]), failures/(successes+failures) >= ratio and at least
// minRequests results (successes+failures; ignored calls don't count) are in
// the window. ratio must be in (0, 1] and minRequests >= 1. It is evaluated on
// every failure in the Closed state, in addition to the consecutive-failure
// condition. Default: disabled.
func WithFailureRatio(ratio float64, minRequests int) Option {
	return optionFunc(func(o *options) { o.ratio, o.minRequests, o.ratioSet = ratio, minRequests, true })
}

// WithWindow sets the rolling window used by [WithFailureRatio] and reported
// by [Breaker.Counts]: d split into buckets buckets of d/buckets each (so the
// window slides by one bucket at a time; the effective length is
// buckets*(d/buckets)). d must be positive, buckets in [1, 1024] and d/buckets
// at least 1ns. Default: 10s in 10 buckets, used only when
// [WithFailureRatio] is given. Without either option no window is kept: the closed state never reads the clock, and Counts
// reports the totals since the breaker last closed.
func WithWindow(d time.Duration, buckets int) Option {
	return optionFunc(func(o *options) { o.window, o.buckets, o.windowSet = d, buckets, true })
}

// WithOpenTimeout sets how long the breaker stays Open before letting probes
// through (HalfOpen). d must be positive. Default: 5s.
func WithOpenTimeout(d time.Duration) Option {
	return optionFunc(func(o *options) { o.openTimeout = d })
}

// WithProbeLimit sets how many calls may be in flight at once while
// HalfOpen; further calls get [ErrTooManyProbes]. A slot is always given back
// when its call returns, including when the call panics or its result is
// ignored. n must be >= 1. Default: 1.
func WithProbeLimit(n int) Option {
	return optionFunc(func(o *options) { o.probeLimit = n })
}

// WithSuccessesToClose sets how many probe successes close a half-open
// breaker (it may exceed the probe limit: slots are reused as probes
// finish). n must be >= 1. Default: 1.
func WithSuccessesToClose(n int) Option {
	return optionFunc(func(o *options) { o.successes = n })
}

// WithClassifier sets how a non-nil error returned by a call counts. A nil
// error is always a [Success] and a panicking call always a [Failure]; the
// classifier is not consulted for either. An out-of-range Outcome counts as
// Failure. c must not be nil. Default: [DefaultClassifier].
func WithClassifier(c func(err error) Outcome) Option {
	return optionFunc(func(o *options) { o.classifier, o.classifierSet = c, true })
}

// DefaultClassifier ignores context.Canceled (the caller gave up; that says
// nothing about the dependency) and counts every other error as a failure,
// including context.DeadlineExceeded (a slow dependency is a sick one).
func DefaultClassifier(err error) Outcome {
	if errors.Is(err, context.Canceled) {
		return Ignore
	}
	return Failure
}

// WithOnStateChange registers a hook called on every state change with a
// context, the breaker's name and the two states. ctx is the context of the
// [Breaker.Execute] or [Do] call whose admission or result caused the
// transition (as the caller passed it, values and cancellation included);
// transitions caused by a call that takes no context — [Breaker.Allow] and
// its done, [Breaker.State], [Breaker.Counts], or a half-open permit given
// back when it is garbage collected — get [context.Background]. It is
// never called while the breaker holds a lock, so it may call back into the
// breaker (even cause another transition). Hooks are delivered one at a time and in transition order, on
// the goroutine of a caller; a caller's Execute may return before the hook
// for the transition it caused has run if another goroutine is delivering.
// A nil f means no hook. Default: none.
func WithOnStateChange(f func(ctx context.Context, name string, from, to State)) Option {
	return optionFunc(func(o *options) { o.onStateChange = f })
}

// WithObserver reports every call ("breaker.call") and every state change
// ("breaker.state", a gauge) to o, synchronously; see [StageCall] for the
// names. A nil o is ignored. Without an observer nothing is measured: the
// closed-state hot path costs one more nil check. Default: none.
func WithObserver(o observe.Observer) Option {
	return optionFunc(func(opts *options) {
		if o != nil {
			opts.observer = o
		}
	})
}

// WithClock sets the source of "now" (for tests, a fake clock). c must not be
// nil. Default: the process's monotonic clock, read through time.Since (about
// half the cost of time.Now), with runtime timers marking the end of each
// open period and each window bucket, so that successes and refusals need no
// clock reading (see the package doc). With an injected clock the breaker
// reads it instead, and is exact: an Open breaker becomes HalfOpen on the
// first call or [Breaker.State] at or after the deadline, and every result
// lands in the bucket of its instant.
func WithClock(c Clock) Option {
	return optionFunc(func(o *options) { o.clock, o.clockSet = c, true })
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
}

func (o *options) validate() error {
	var errs []error
	if o.consecutive < 0 || int64(o.consecutive) > math.MaxUint32 {
		errs = append(errs, invalid("consecutive failures %d out of range [0, %d]", o.consecutive, uint32(math.MaxUint32)))
	}
	if o.ratioSet {
		if math.IsNaN(o.ratio) || o.ratio <= 0 || o.ratio > 1 {
			errs = append(errs, invalid("failure ratio %v not in (0, 1]", o.ratio))
		}
		if o.minRequests < 1 {
			errs = append(errs, invalid("min requests %d < 1", o.minRequests))
		}
	}
	if o.consecutive == 0 && !o.ratioSet {
		errs = append(errs, invalid("no trip condition: consecutive failures is 0 and no failure ratio"))
	}
	if o.window <= 0 {
		errs = append(errs, invalid("window %v not positive", o.window))
	}
	if o.buckets < 1 || o.buckets > maxBuckets {
		errs = append(errs, invalid("window buckets %d not in [1, %d]", o.buckets, maxBuckets))
	} else if o.window > 0 && o.window/time.Duration(o.buckets) <= 0 {
		errs = append(errs, invalid("window %v too short for %d buckets", o.window, o.buckets))
	}
	if o.openTimeout <= 0 {
		errs = append(errs, invalid("open timeout %v not positive", o.openTimeout))
	}
	if o.probeLimit < 1 {
		errs = append(errs, invalid("probe limit %d < 1", o.probeLimit))
	}
	if o.successes < 1 {
		errs = append(errs, invalid("successes to close %d < 1", o.successes))
	}
	if o.classifierSet && o.classifier == nil {
		errs = append(errs, invalid("nil classifier"))
	}
	if o.clockSet && o.clock == nil {
		errs = append(errs, invalid("nil clock"))
	}
	return errors.Join(errs...)
}
