package seckillprom

import "fmt"

// DefaultBuckets are the bounds of seckill_stage_duration_seconds, in
// seconds: 50 µs (an in-process check) to 1 s (a slow database commit).
var DefaultBuckets = []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1}

// DefaultMaxStages is the default cap on distinct stage names.
const DefaultMaxStages = 64

// Option configures [New]. A nil Option is ignored.
type Option func(*options)

type options struct {
	activity  bool
	maxStages int
	buckets   []float64
}

// WithActivityLabel adds an activity label (Event.Activity) to every series
// but seckill_observer_dropped_total. Each sale then gets its own series:
// use it when a service runs few sales at a time.
func WithActivityLabel() Option {
	return func(o *options) { o.activity = true }
}

// WithMaxStages caps the distinct stage names that get series (default
// [DefaultMaxStages]); n must be at least 1.
func WithMaxStages(n int) Option {
	return func(o *options) { o.maxStages = n }
}

// WithBuckets sets the histogram bounds in seconds (default
// [DefaultBuckets]); they must be strictly increasing and non-empty.
func WithBuckets(b []float64) Option {
	return func(o *options) { o.buckets = append([]float64(nil), b...) }
}

func (o *options) check() error {
	if o.maxStages < 1 {
		return fmt.Errorf("%w: max stages %d, want at least 1", ErrBadOption, o.maxStages)
	}
	if len(o.buckets) == 0 {
		return fmt.Errorf("%w: no histogram buckets", ErrBadOption)
	}
	for i := 1; i < len(o.buckets); i++ {
		if !(o.buckets[i] > o.buckets[i-1]) {
			return fmt.Errorf("%w: buckets not strictly increasing at %d (%g after %g)", ErrBadOption, i, o.buckets[i], o.buckets[i-1])
		}
	}
	return nil
}
