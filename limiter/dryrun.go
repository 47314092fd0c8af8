package limiter

import (
	"context"
	"fmt"
	"sync/atomic"
)

// DryRun wraps a [Limiter] to observe it without enforcing it: every
// request is allowed, and those the wrapped limiter refused — or could not
// decide because its store failed — are counted and reported. Use it to
// roll out a new limit and watch what it would refuse.
//
// Allowed requests spend the wrapped limiter's budget as usual (so its
// view of traffic is the real one); refused ones spend nothing. Results
// come back with Allowed true and, for would-be refusals, DryRunRefused set
// (the other fields are the wrapped limiter's). DryRun is safe for
// concurrent use and implements [Limiter] and [Refunder].
type DryRun struct {
	l        Limiter
	onRefuse func(ctx context.Context, key string, r Result, err error)

	checked, refused, failed atomic.Uint64
}

// DryRunStats counts the decisions of a [DryRun].
type DryRunStats struct {
	Checked     uint64 // decisions made
	WouldRefuse uint64 // refusals let through
	Failures    uint64 // store failures let through (also in WouldRefuse)
}

// NewDryRun wraps l. onRefuse, if not nil, is called synchronously for each
// would-be refusal with the ctx given to AllowN, the key, and the wrapped
// limiter's Result and error (nil for a plain refusal).
func NewDryRun(l Limiter, onRefuse func(ctx context.Context, key string, r Result, err error)) (*DryRun, error) {
	if isNil(l) {
		return nil, fmt.Errorf("%w: dry run of a nil limiter", ErrInvalidConfig)
	}
	return &DryRun{l: l, onRefuse: onRefuse}, nil
}

// AllowN implements [Limiter]; it always allows (the error is non-nil only
// for an invalid n, which is a programming error).
func (d *DryRun) AllowN(ctx context.Context, key string, n int) (Result, error) {
	d.checked.Add(1)
	r, err := d.l.AllowN(ctx, key, n)
	if err == nil && r.Allowed {
		return r, nil
	}
	if isInvalidArgument(err) {
		return r, err
	}
	d.refused.Add(1)
	if err != nil {
		d.failed.Add(1)
	}
	if d.onRefuse != nil {
		d.onRefuse(ctx, key, r, err)
	}
	r.Allowed, r.DryRunRefused, r.RetryAfter = true, true, 0
	return r, nil
}

// RefundN forwards to the wrapped limiter if it is a [Refunder].
func (d *DryRun) RefundN(ctx context.Context, key string, n int) error {
	if rf, ok := d.l.(Refunder); ok {
		return rf.RefundN(ctx, key, n)
	}
	return nil
}

// Stats returns the counts so far.
func (d *DryRun) Stats() DryRunStats {
	return DryRunStats{Checked: d.checked.Load(), WouldRefuse: d.refused.Load(), Failures: d.failed.Load()}
}
