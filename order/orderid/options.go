package orderid

import (
	"fmt"
	"time"

	"github.com/seckillkit/seckill/internal/observe"
)

// Clock supplies the current time; inject one with [WithClock] in tests.
type Clock interface{ Now() time.Time }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// defaultEpoch is the epoch of a [Generator] without [WithEpoch]:
// 2024-01-01 UTC.
var defaultEpoch = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// Each constructor takes its own option type, so an option that does not
// apply to it does not compile:
//
//	constructor                    option type      options
//	New, Lease.NewGenerator        GeneratorOption  WithClock, WithEpoch
//	AcquireMachine                 LeaseOption      WithKeyPrefix, WithTTL, WithObserver
//
// Both are interfaces, built only by the With… functions. A nil option is
// ignored.
type (
	// GeneratorOption configures [New] and [Lease.NewGenerator].
	GeneratorOption interface{ applyGenerator(*generatorOptions) }
	// LeaseOption configures [AcquireMachine].
	LeaseOption interface{ applyLease(*leaseOptions) }
)

type generatorOption func(*generatorOptions)

func (f generatorOption) applyGenerator(o *generatorOptions) { f(o) }

type leaseOption func(*leaseOptions)

func (f leaseOption) applyLease(o *leaseOptions) { f(o) }

type generatorOptions struct {
	clock Clock
	epoch time.Time
	err   error
}

type leaseOptions struct {
	prefix   string
	ttl      time.Duration
	observer observe.Observer
	err      error
}

func buildGenerator(opts []GeneratorOption) (generatorOptions, error) {
	o := generatorOptions{clock: systemClock{}, epoch: defaultEpoch}
	for _, opt := range opts {
		if opt != nil {
			opt.applyGenerator(&o)
		}
	}
	return o, o.err
}

func buildLease(opts []LeaseOption) (leaseOptions, error) {
	o := leaseOptions{prefix: "seckill:", ttl: 30 * time.Second}
	for _, opt := range opts {
		if opt != nil {
			opt.applyLease(&o)
		}
	}
	if o.err == nil && o.ttl < 3*time.Millisecond {
		o.err = fmt.Errorf("%w: lease TTL %s too short (want >= 3ms)", ErrInvalidConfig, o.ttl)
	}
	return o, o.err
}

// WithClock sets the generator's source of "now". Default: the system
// clock. A nil clock fails the constructor with [ErrInvalidConfig].
func WithClock(c Clock) GeneratorOption {
	return generatorOption(func(o *generatorOptions) {
		if c == nil {
			o.err = fmt.Errorf("%w: nil clock", ErrInvalidConfig)
			return
		}
		o.clock = c
	})
}

// WithEpoch sets the generator's epoch. Default 2024-01-01 00:00 UTC.
// Changing it on a running system can repeat IDs; a floor from a [Lease]
// is relative to it, so every owner of a machine ID must use the same.
func WithEpoch(t time.Time) GeneratorOption {
	return generatorOption(func(o *generatorOptions) { o.epoch = t })
}

// WithKeyPrefix sets the prefix of the lease's Redis keys. Default
// "seckill:".
func WithKeyPrefix(p string) LeaseOption {
	return leaseOption(func(o *leaseOptions) { o.prefix = p })
}

// WithTTL sets the TTL of the machine-ID lease; [Lease.Run] renews it
// every TTL/3. Default 30 s; at least 3 ms.
func WithTTL(d time.Duration) LeaseOption {
	return leaseOption(func(o *leaseOptions) { o.ttl = d })
}

// WithObserver reports every renewal of the lease ([Lease.Renew], and each
// renewal of [Lease.Run]) to o, synchronously and with the renewing call's
// context (Run's for its own), as the stage "orderid.lease": outcome "ok"
// (renewed), "lost" (the lease expired or another instance holds it: the
// generator must stop; [ErrLeaseLost]) or "error" (Redis failed; Run
// retries until the TTL runs out, then reports "lost"), with its Duration
// and Name = the machine ID in decimal. A nil o is ignored. Default none.
func WithObserver(o observe.Observer) LeaseOption {
	return leaseOption(func(opts *leaseOptions) {
		if o != nil {
			opts.observer = o
		}
	})
}
