package orderid

import (
	"errors"

	"github.com/seckillkit/seckill/internal/lifecycle"
)

// Sentinel errors; failures of Redis are wrapped with an "orderid: ..."
// prefix and %w.
var (
	// ErrNoMachineID is returned by [AcquireMachine] when every machine ID
	// is leased by another instance.
	ErrNoMachineID = errors.New("orderid: no free machine id")

	// ErrLeaseLost is returned by [Lease.Run] and [Lease.Renew] when the
	// lease expired or was taken by another instance: the generator must
	// stop.
	ErrLeaseLost = errors.New("orderid: machine id lease lost")

	// ErrClockOverflow is returned by [Generator.NextID] once the 41-bit
	// millisecond field overflows (year 2093 with the default epoch).
	ErrClockOverflow = errors.New("orderid: id generator time overflow")

	// ErrInvalidConfig is wrapped by the constructors' errors for bad
	// configuration: an invalid argument or option, or a nil collaborator
	// (a machine ID out of range, an epoch in the future, a nil clock or
	// Redis client, a TTL under 3 ms).
	ErrInvalidConfig = errors.New("orderid: invalid configuration")

	// ErrClosed is returned by [Lease.Run] after [Lease.Close];
	// ErrRunning (wrapped) by a second Run. They are the sentinels every
	// seckill package shares (order.ErrClosed is the same value).
	ErrClosed  = lifecycle.ErrClosed
	ErrRunning = lifecycle.ErrRunning
)
