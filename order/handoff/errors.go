package handoff

import "errors"

// Sentinel errors of the package. Bad configuration wraps
// order.ErrInvalidConfig.
var (
	// ErrRetry is returned by [Submitter.Submit] when both Kafka and the
	// fallback store failed: the reservation was released (or its release
	// was attempted, see the joined error) and the caller should ask the
	// user to try again.
	ErrRetry = errors.New("order: not accepted, retry")
)

// ErrConsumed is returned by [Fence.Release] when the reservation already
// has an order: it was consumed, so it is not released (cancel the order
// instead).
var ErrConsumed = errors.New("order: reservation already consumed by an order")
