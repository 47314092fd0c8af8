package payment

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/seckillkit/seckill/order"
)

// Option configures [NewHandler]. A nil option is ignored.
type Option interface{ apply(*options) }

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

type options struct {
	clock     order.Clock
	tolerance time.Duration
	prefix    string
	logger    *slog.Logger
	err       error
}

func (o *options) fail(format string, args ...any) {
	if o.err == nil {
		o.err = fmt.Errorf("%w: "+format, append([]any{order.ErrInvalidConfig}, args...)...)
	}
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// WithClock sets the source of "now" of the timestamp check. Default: the
// system clock; a nil c fails [NewHandler] with order.ErrInvalidConfig.
func WithClock(c order.Clock) Option {
	return optionFunc(func(o *options) {
		if c == nil {
			o.fail("nil clock")
			return
		}
		o.clock = c
	})
}

// WithTolerance sets how far a callback's signed timestamp may be from
// now, either way; the replay guard keeps an event ID claimed at least
// twice as long. Default 5 minutes; it must be positive.
func WithTolerance(d time.Duration) Option {
	return optionFunc(func(o *options) {
		if d <= 0 {
			o.fail("tolerance %v", d)
			return
		}
		o.tolerance = d
	})
}

// WithKeyPrefix sets the prefix of the replay guard's Redis keys. Default
// "seckill:".
func WithKeyPrefix(p string) Option {
	return optionFunc(func(o *options) { o.prefix = p })
}
