package dbfallback

import (
	"fmt"
	"regexp"
	"time"

	"github.com/seckillkit/seckill/internal/observe"
)

// Clock supplies the current time. The Store checks the activity window
// (Start <= now < End) and stamps reservations with it, in milliseconds.
type Clock interface{ Now() time.Time }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// defaultTablePrefix is the default of [WithTablePrefix]: the tables are
// seckill_fallback_pool and seckill_fallback_reservation.
const defaultTablePrefix = "seckill_fallback_"

// Option configures a [Store] ([New]); only this package's With…
// functions make one. A nil Option is ignored.
type Option interface{ apply(*options) }

type option func(*options)

func (f option) apply(o *options) { f(o) }

type options struct {
	prefix string
	clock  Clock
	obs    observe.Observer
}

func defaultOptions() options {
	return options{prefix: defaultTablePrefix, clock: systemClock{}}
}

// WithTablePrefix sets the prefix of the two table names: "<prefix>pool" and
// "<prefix>reservation". Default "seckill_fallback_".
// It must be an SQL identifier of at most 40 bytes (letters, digits and
// underscores, not starting with a digit), since it is written into SQL
// text and index names.
func WithTablePrefix(p string) Option { return option(func(o *options) { o.prefix = p }) }

// WithClock sets the clock that decides the activity window and stamps
// reservations and releases. Default: the system clock (time.Now) of the
// process, not the database's: app servers whose clocks disagree by d may
// disagree by d on the window's edges. A nil c is an [ErrInvalidConfig]
// error.
func WithClock(c Clock) Option { return option(func(o *options) { o.clock = c }) }

// WithObserver reports every Reserve, Release, Open and Drain to o (see
// the stage table at [StageReserve]). A nil o is ignored. Default: none.
func WithObserver(o observe.Observer) Option {
	return option(func(opt *options) {
		if o != nil {
			opt.obs = o
		}
	})
}

var identRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,39}$`)

func (o options) validate() error {
	switch {
	case o.clock == nil:
		return fmt.Errorf("%w: nil clock", ErrInvalidConfig)
	case !identRe.MatchString(o.prefix):
		return fmt.Errorf("%w: table prefix %q: want 1..40 letters, digits or underscores, not starting with a digit", ErrInvalidConfig, o.prefix)
	}
	return nil
}
