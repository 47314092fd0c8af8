package stock

import "context"

// Fallback reserves stock some other way (typically the database, with a
// row lock or a conditional UPDATE) when Redis is unavailable. It is off by
// default: without it Reserve fails fast with [ErrUnavailable], which lets
// the service answer "too busy" in microseconds.
//
// When set with [WithFallback], Reserve calls it with the original request
// only after the Redis call failed with ErrUnavailable. The fallback's Result
// is returned with Result.Fallback set (its error is joined with the Redis
// error). The Redis ledger knows nothing of fallback reservations: Release
// of such a reservation ID writes a harmless tombstone, and the fallback's owner
// must give its units back itself. Because the Redis script may have run
// before a timeout, the fallback must be idempotent by ReservationID too, and the
// reconciler should compare both stores after an outage.
type Fallback interface {
	Reserve(ctx context.Context, req Request) (Result, error)
}

// FallbackFunc adapts a function to [Fallback].
type FallbackFunc func(ctx context.Context, req Request) (Result, error)

// Reserve calls f.
func (f FallbackFunc) Reserve(ctx context.Context, req Request) (Result, error) { return f(ctx, req) }
