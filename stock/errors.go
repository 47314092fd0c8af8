package stock

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/seckillkit/seckill/internal/lifecycle"
)

// Sentinel errors. Denials (sold out, limit reached, …) are not errors: they
// are a [Status] in a [Result]. Use [Result.Err] to turn a denial into one of
// the denial sentinels below when an error is more convenient.
var (
	// ErrUnavailable wraps every failure to reach Redis or to get an answer
	// from it: connection refused or closed, timeouts, a cancelled context,
	// pool exhaustion, and server replies such as LOADING, BUSY, READONLY,
	// MASTERDOWN, CLUSTERDOWN, TRYAGAIN, OOM, NOREPLICAS or MISCONF. The
	// cause is wrapped as well, so errors.Is(err, context.DeadlineExceeded)
	// still works.
	//
	// A timeout is an uncertain outcome: the script may have run. Retrying
	// [Deductor.Reserve] or [Deductor.Release] with the same reservation ID is
	// safe; a reservation is deducted at most once per reservation ID.
	ErrUnavailable = errors.New("stock: redis unavailable")

	// ErrInvalidArgument reports a call with bad input. For a Reserve,
	// Release or lookup: an activity or user ID that is not [ValidID]
	// (empty, over [MaxIDLen] bytes, or a byte outside [A-Za-z0-9._@+-]), an
	// empty or over-long reservation ID, a qty <= 0, above [MaxQuantity] or
	// above the activity's per-user limit. For a Load, Reset or Rebuild, a
	// bad [Activity]: an ID that is not [ValidID], stock or per-user limit
	// < 0 or above [MaxQuantity], more than 64 shards, End not after Start,
	// negative TTL, or an End + TTL already past in Redis time; or a Rebuild
	// with bad live reservations. Nothing was written.
	ErrInvalidArgument = errors.New("stock: invalid argument")

	// ErrInvalidConfig reports bad configuration given to [New] or
	// [NewPreloader]: a nil collaborator (Redis client, clock, logger,
	// source, recovery) or an option value out of range.
	ErrInvalidConfig = errors.New("stock: invalid configuration")

	// ErrIDConflict reports an ID reused for a different request: a
	// reservation ID already in the ledger for a different user or
	// quantity (Reserve), or an adjustment ID already applied with another
	// delta (Adjust). IDs must be unique per reservation (adjustment);
	// nothing was written and the first one is unchanged.
	ErrIDConflict = errors.New("stock: reservation or adjustment ID reused for a different request")

	// ErrBadReply reports a Redis reply of an unexpected shape (a key of the
	// wrong type, a foreign value in the ledger, a proxy that rewrote the
	// reply). It is never a panic.
	ErrBadReply = errors.New("stock: unexpected reply from redis")

	// ErrLost is returned by [Deductor.ReleaseReserved] when the ledger has
	// no entry for a reservation the caller knows was made, in a copy of
	// the activity created before it: Redis lost the reservation. The
	// activity was frozen (and the loss reported through [WithOnLoss]);
	// retry after it was rebuilt from the database ([WithRecovery]).
	ErrLost = errors.New("stock: reservation lost by redis")

	// ErrClosed is returned by [Deductor.Run] after [Deductor.Close];
	// ErrRunning by a Run while another Run is active. They are the
	// sentinels every seckill package shares for this (limiter.ErrClosed,
	// outbox.ErrClosed, order.ErrClosed are the same value).
	ErrClosed  = lifecycle.ErrClosed
	ErrRunning = lifecycle.ErrRunning
)

// ErrRefused is the umbrella of every refusal: each denial sentinel below
// wraps it, so one errors.Is(err, ErrRefused) tells "stock said no" from
// "something is broken". Redis failures ([ErrUnavailable]), bad input
// ([ErrInvalidArgument]), a reused ID ([ErrIDConflict]), a malformed reply
// ([ErrBadReply]), a lost reservation ([ErrLost]) and cancelled contexts
// never wrap it.
var ErrRefused = errors.New("stock: refused")

// refusal is a denial sentinel: its own message, wrapping [ErrRefused].
type refusal struct{ msg string }

func (e *refusal) Error() string { return e.msg }
func (e *refusal) Unwrap() error { return ErrRefused }

// Denial sentinels, each wrapping [ErrRefused]. Reserve reports a denial as
// a [Status] in its [Result], never as an error; [Result.Err] turns it into
// one of the first eight. ErrNotLoaded is also the error of
// [Deductor.Remaining], [Deductor.Freeze] and [Deductor.Unfreeze] for an
// activity that is not in Redis.
var (
	ErrSoldOut      error = &refusal{"stock: sold out"}
	ErrLimitReached error = &refusal{"stock: per-user limit reached"}
	ErrNotStarted   error = &refusal{"stock: activity not started"}
	ErrEnded        error = &refusal{"stock: activity ended"}
	ErrNotLoaded    error = &refusal{"stock: activity not loaded"}
	ErrReleased     error = &refusal{"stock: reservation released"}
	ErrFrozen       error = &refusal{"stock: activity frozen, retry later"}
	ErrPaused       error = &refusal{"stock: activity paused, retry later"}

	// ErrInsufficient reports a withdrawal by [Deductor.Adjust] of more
	// units than the activity holds unreserved. For an un-sharded activity
	// nothing was written; for a sharded one see [Adjustment.Applied].
	ErrInsufficient error = &refusal{"stock: fewer unreserved units than the withdrawal asks"}

	// ErrLive reports a [Deductor.Rebuild] of an activity that is loaded and
	// not frozen (freeze it first), or that changed while a [Preloader]
	// prepared its rebuild. Nothing was written.
	ErrLive error = &refusal{"stock: activity is live in redis (not frozen)"}
)

// transientPrefixes are Redis error replies that mean "the server cannot
// serve this now", as opposed to a script or data error.
var transientPrefixes = []string{
	"LOADING", "BUSY", "READONLY", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN",
	"OOM", "NOREPLICAS", "MISCONF",
}

// classify wraps a Redis call failure: transport and availability problems
// become ErrUnavailable, other server replies (a Lua runtime error, WRONGTYPE)
// are wrapped as they are.
func classify(op string, err error) error {
	if err == nil {
		return nil
	}
	var rerr redis.Error
	if errors.As(err, &rerr) && !errors.Is(err, redis.ErrClosed) {
		for _, p := range transientPrefixes {
			if redis.HasErrorPrefix(err, p) {
				return fmt.Errorf("stock: %s: %w: %w", op, ErrUnavailable, err)
			}
		}
		return fmt.Errorf("stock: %s: %w", op, err)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("stock: %s: %w: %w", op, ErrUnavailable, err)
	}
	return fmt.Errorf("stock: %s: %w: %w", op, ErrUnavailable, err)
}

func badReply(op string, format string, args ...any) error {
	return fmt.Errorf("stock: %s: %w: %s", op, ErrBadReply, fmt.Sprintf(format, args...))
}
