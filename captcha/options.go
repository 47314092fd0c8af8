package captcha

import (
	"fmt"
	"time"

	"github.com/seckillkit/seckill/internal/observe"
)

// Clock tells the time; it only computes [Challenge.ExpiresAt] (expiry
// itself is the Redis key's TTL).
type Clock interface{ Now() time.Time }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// Option configures a [Store]: [New] is the package's only constructor, so
// every option applies to it. Options are made by the package's With…
// functions only. A nil Option is ignored.
type Option interface{ apply(*options) }

// optionFunc is the one implementation of [Option].
type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

type options struct {
	prefix      string
	ttl         time.Duration
	maxAttempts int
	clock       Clock
	observer    observe.Observer
}

func defaultOptions() options {
	return options{prefix: defaultKeyPrefix, ttl: 2 * time.Minute, maxAttempts: 5, clock: systemClock{}}
}

func (o *options) validate() error {
	switch {
	case o.ttl < time.Millisecond:
		return fmt.Errorf("%w: TTL %v < 1ms", ErrInvalidConfig, o.ttl)
	case o.maxAttempts < 1:
		return fmt.Errorf("%w: max attempts %d < 1", ErrInvalidConfig, o.maxAttempts)
	case o.clock == nil:
		return fmt.Errorf("%w: nil clock", ErrInvalidConfig)
	}
	return nil
}

// WithKeyPrefix sets the prefix of every Redis key. Default "seckill:".
func WithKeyPrefix(p string) Option { return optionFunc(func(o *options) { o.prefix = p }) }

// WithTTL sets how long a challenge can be answered. Default 2 minutes.
func WithTTL(d time.Duration) Option { return optionFunc(func(o *options) { o.ttl = d }) }

// WithMaxAttempts sets how many wrong answers burn a challenge. Default 5:
// the 5th wrong answer returns [ErrTooManyAttempts] and deletes it.
func WithMaxAttempts(n int) Option { return optionFunc(func(o *options) { o.maxAttempts = n }) }

// WithClock injects the clock used for [Challenge.ExpiresAt]. Default: the
// system clock. A nil clock fails [New] with [ErrInvalidConfig].
func WithClock(c Clock) Option { return optionFunc(func(o *options) { o.clock = c }) }

// WithObserver reports every [Store.Generate] ("captcha.create") and
// [Store.Verify] ("captcha.verify") to o, synchronously, with the caller's
// ctx; see [StageCreate] for the outcomes. A nil o is ignored. Without an
// observer nothing is measured. Default: none.
func WithObserver(o observe.Observer) Option {
	return optionFunc(func(opts *options) {
		if o != nil {
			opts.observer = o
		}
	})
}
