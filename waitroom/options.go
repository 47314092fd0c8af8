package waitroom

import (
	"fmt"
	"time"

	"github.com/seckillkit/seckill/internal/observe"
)

// Option configures [New]. A nil Option is ignored.
type Option interface{ apply(*options) }

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

type options struct {
	prefix    string
	clock     Clock
	clockSet  bool
	ticketTTL time.Duration
	passTTL   time.Duration
	abandon   time.Duration
	observer  observe.Observer
}

func defaultOptions() options {
	return options{
		prefix:    defaultKeyPrefix,
		clock:     systemClock{},
		ticketTTL: 6 * time.Hour,
		passTTL:   10 * time.Minute,
		abandon:   2 * time.Minute,
	}
}

func (o *options) validate() error {
	switch {
	case o.clock == nil:
		return fmt.Errorf("%w: nil clock", ErrInvalidConfig)
	case o.ticketTTL < time.Second:
		return fmt.Errorf("%w: ticket TTL %v < 1s", ErrInvalidConfig, o.ticketTTL)
	case o.passTTL < time.Second:
		return fmt.Errorf("%w: pass TTL %v < 1s", ErrInvalidConfig, o.passTTL)
	case o.abandon != 0 && o.abandon < 2*time.Second:
		return fmt.Errorf("%w: abandon after %v: 0 (never) or at least 2s", ErrInvalidConfig, o.abandon)
	}
	return nil
}

// WithKeyPrefix sets the prefix of every Redis key. Default "seckill:".
func WithKeyPrefix(p string) Option { return optionFunc(func(o *options) { o.prefix = p }) }

// WithClock injects the clock; nil fails [New] with [ErrInvalidConfig].
// Default: the system clock for tickets and passes, and Redis TIME inside
// the scripts, so every instance shares one clock for the allowance, the
// start and abandonment. With WithClock the scripts get the injected
// clock's time instead (tests; or app clocks tightly synchronised).
func WithClock(c Clock) Option {
	return optionFunc(func(o *options) { o.clock = c; o.clockSet = c != nil })
}

// WithTicketTTL sets how long a queue ticket from [Room.Join] stays valid
// (a rejoin issues a fresh one for the same place). Default 6 hours; at
// least 1 second.
func WithTicketTTL(d time.Duration) Option { return optionFunc(func(o *options) { o.ticketTTL = d }) }

// WithPassTTL sets how long an admission lasts: the admitted user holds a
// slot of the cap ([Config].MaxActive) until [Room.Done] or this long, and
// the admission pass expires then. Default 10 minutes; at least 1 second.
func WithPassTTL(d time.Duration) Option { return optionFunc(func(o *options) { o.passTTL = d }) }

// WithAbandonAfter sets the stated time after which an entry that has
// neither joined nor polled ([Room.Poll]) is abandoned: [Room.Admit] skips
// it without using the allowance, and it is not admitted later. Poll
// times are kept to the second. Default 2 minutes; 0 never abandons; else
// at least 2 seconds.
func WithAbandonAfter(d time.Duration) Option {
	return optionFunc(func(o *options) { o.abandon = d })
}

// WithObserver reports one event per call to o (a nil observer is
// ignored): stages "waitroom.join", "waitroom.poll", "waitroom.admit"
// (Value: the number admitted) and "waitroom.verify", with outcome "ok",
// the refusal ("malformed", "invalid_signature", "expired", "wrong_user",
// "not_admitted"), "invalid_argument" or "error".
func WithObserver(o observe.Observer) Option {
	return optionFunc(func(opts *options) {
		if o != nil {
			opts.observer = o
		}
	})
}
