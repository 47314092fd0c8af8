package orderid

import (
	"fmt"
	"time"
)

// Clock supplies the current time; inject one with [WithClock] in tests.
type Clock interface{ Now() time.Time }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// DefaultEpoch returns the epoch of a [Generator] without [WithEpoch]:
// 2024-01-01 UTC.
func DefaultEpoch() time.Time { return time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC) }

// Each constructor takes its own option type, so an option that does not
// apply to it does not compile:
//
//	constructor                    option type      options
//	New, Lease.NewGenerator        GeneratorOption  WithClock, WithEpoch
//	AcquireMachine                 LeaseOption      WithKeyPrefix, WithTTL
//
// A nil option is ignored.
type (
	// GeneratorOption configures [New] and [Lease.NewGenerator].
	GeneratorOption func(*generatorOptions)
	// LeaseOption configures [AcquireMachine].
	LeaseOption func(*leaseOptions)
)

type generatorOptions struct {
	clock Clock
	epoch time.Time
	err   error
}

type leaseOptions struct {
	prefix string
	ttl    time.Duration
	err    error
}

func buildGenerator(opts []GeneratorOption) (generatorOptions, error) {
	o := generatorOptions{clock: systemClock{}, epoch: DefaultEpoch()}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	return o, o.err
}

func buildLease(opts []LeaseOption) (leaseOptions, error) {
	o := leaseOptions{prefix: "seckill:", ttl: 30 * time.Second}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if o.err == nil && o.ttl < 3*time.Millisecond {
		o.err = fmt.Errorf("%w: lease TTL %s too short (want >= 3ms)", ErrInvalidOption, o.ttl)
	}
	return o, o.err
}

// WithClock sets the generator's source of "now". Default: the system
// clock. A nil clock fails the constructor with [ErrInvalidOption].
func WithClock(c Clock) GeneratorOption {
	return func(o *generatorOptions) {
		if c == nil {
			o.err = fmt.Errorf("%w: nil clock", ErrInvalidOption)
			return
		}
		o.clock = c
	}
}

// WithEpoch sets the generator's epoch. Default [DefaultEpoch]. Changing
// it on a running system can repeat IDs; a floor from a [Lease] is
// relative to it, so every owner of a machine ID must use the same.
func WithEpoch(t time.Time) GeneratorOption {
	return func(o *generatorOptions) { o.epoch = t }
}

// WithKeyPrefix sets the prefix of the lease's Redis keys. Default
// "seckill:".
func WithKeyPrefix(p string) LeaseOption {
	return func(o *leaseOptions) { o.prefix = p }
}

// WithTTL sets the TTL of the machine-ID lease; [Lease.Run] renews it
// every TTL/3. Default 30 s; at least 3 ms.
func WithTTL(d time.Duration) LeaseOption {
	return func(o *leaseOptions) { o.ttl = d }
}
