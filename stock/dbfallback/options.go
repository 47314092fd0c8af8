package dbfallback

import (
	"fmt"
	"regexp"
	"time"
)

// Clock supplies the current time. The Store checks the activity window
// (Start <= now < End) and stamps reservations with it, in milliseconds.
type Clock interface{ Now() time.Time }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// DefaultTablePrefix is the default of [WithTablePrefix]: the tables are
// seckill_fallback_pool and seckill_fallback_reservation.
const DefaultTablePrefix = "seckill_fallback_"

// Option configures a [Store]; it applies to [New] only. A nil Option is
// ignored.
type Option func(*options)

type options struct {
	prefix string
	clock  Clock
}

func defaultOptions() options {
	return options{prefix: DefaultTablePrefix, clock: systemClock{}}
}

// WithTablePrefix sets the prefix of the two table names: "<prefix>pool" and
// "<prefix>reservation". Default "seckill_fallback_" ([DefaultTablePrefix]).
// It must be an SQL identifier of at most 40 bytes (letters, digits and
// underscores, not starting with a digit), since it is written into SQL
// text and index names.
func WithTablePrefix(p string) Option { return func(o *options) { o.prefix = p } }

// WithClock sets the clock that decides the activity window and stamps
// reservations and releases. Default: the system clock (time.Now) of the
// process, not the database's: app servers whose clocks disagree by d may
// disagree by d on the window's edges. Must not be nil.
func WithClock(c Clock) Option { return func(o *options) { o.clock = c } }

var identRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,39}$`)

func (o options) validate() error {
	switch {
	case o.clock == nil:
		return fmt.Errorf("dbfallback: nil clock")
	case !identRe.MatchString(o.prefix):
		return fmt.Errorf("dbfallback: table prefix %q: want 1..40 letters, digits or underscores, not starting with a digit", o.prefix)
	}
	return nil
}
