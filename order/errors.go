package order

import (
	"errors"
	"fmt"

	"github.com/seckillkit/seckill/internal/lifecycle"
)

// Sentinel errors. Business denials of Pay and Cancel are reported with these
// sentinels so callers can branch with errors.Is; infrastructure failures are
// wrapped with a "order: ..." prefix and %w.
var (
	// ErrRetry is returned by [Submitter.Submit] when both Kafka and the
	// fallback store failed: the reservation was released (or its release
	// was attempted, see the joined error) and the caller should ask the
	// user to try again.
	ErrRetry = errors.New("order: not accepted, retry")

	// ErrInvalidMessage reports a message that fails validation, and is
	// the package's invalid-input sentinel: a call given an invalid user,
	// activity or reservation ID wraps it too ([ErrInvalidID]). Decoding
	// and validation failures in the consumer are wrapped in a
	// [PermanentError].
	ErrInvalidMessage = errors.New("order: invalid message")

	// ErrInvalidID reports a user or activity ID that is not [ValidID]
	// (empty, longer than [MaxIDLen], or a byte outside [A-Za-z0-9._@+-]),
	// in a [Message] or an argument. It wraps [ErrInvalidMessage]. The
	// error never echoes an over-long ID.
	ErrInvalidID = fmt.Errorf("%w: invalid user or activity id", ErrInvalidMessage)

	// ErrUnsupportedVersion reports a message whose "v" field is newer than
	// this package understands.
	ErrUnsupportedVersion = errors.New("order: unsupported message version")

	// ErrOrderNotFound is returned by Pay and Cancel for an unknown order number.
	ErrOrderNotFound = errors.New("order: order not found")

	// ErrAlreadyPaid is returned by Pay when the order was already paid (a
	// retry; callers may treat it as success) and by Cancel when the order
	// is paid and can no longer be cancelled.
	ErrAlreadyPaid = errors.New("order: order already paid")

	// ErrAlreadyCancelled is returned by Cancel when the order was already
	// cancelled (a retry; the reservation release is re-issued idempotently).
	ErrAlreadyCancelled = errors.New("order: order already cancelled")

	// ErrActivityNotFound is returned by [Reconciler.Reconcile] when the
	// activity has no seckill_activity row; nothing is released for it
	// (Report.ActivityMissing).
	ErrActivityNotFound = errors.New("order: activity not found")

	// ErrReleasePending is returned (joined with the cause) by
	// [Canceller.Cancel] when the order is cancelled in the DB but the Redis
	// reservation could not be released yet: call Cancel again (the delay
	// queue does) or let the [Reconciler] settle it.
	ErrReleasePending = errors.New("order: cancelled, reservation release pending")

	// ErrOrderCancelled is returned by Pay when the order was cancelled
	// (explicitly or because its payment window expired). The refund hook
	// ([WithOnPayCancelled]) has been called: the payment must be refunded.
	ErrOrderCancelled = errors.New("order: order cancelled, payment must be refunded")

	// ErrNoDeadLetter is returned from [Consumer.Consume] when a message is
	// permanent (poison) and no dead-letter sink was configured: the
	// consumer stops rather than skipping the message silently.
	ErrNoDeadLetter = errors.New("order: poison message and no dead-letter sink configured")

	// ErrBadReply reports a Redis reply of an unexpected shape.
	ErrBadReply = errors.New("order: unexpected reply from redis")

	// ErrClosed is returned by Run after Close; ErrRunning (wrapped, with
	// the loop's name) by a Run while another Run of the same part is
	// active. They are the sentinels every seckill package shares for this
	// (stock.ErrClosed, outbox.ErrClosed, … are the same value).
	ErrClosed  = lifecycle.ErrClosed
	ErrRunning = lifecycle.ErrRunning

	// ErrInvalidConfig is returned by constructors and functions given an
	// invalid option or a missing collaborator (an invalid table name, a
	// nil db or logger, a non-positive pay timeout, a dialect [Schema] has
	// no DDL for, …).
	ErrInvalidConfig = errors.New("order: invalid configuration")
)

// PermanentError marks a failure that retrying cannot fix: an undecodable or
// invalid message, or a handler error that keeps failing although the
// database is healthy. The consumer sends such messages to the dead-letter
// sink and moves on.
type PermanentError struct {
	Err error
}

// Error implements error.
func (e *PermanentError) Error() string {
	if e == nil || e.Err == nil {
		return "order: permanent error"
	}
	return "order: permanent: " + e.Err.Error()
}

// Unwrap returns the cause.
func (e *PermanentError) Unwrap() error { return e.Err }

// Permanent wraps err in a [PermanentError]; nil stays nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	var pe *PermanentError
	if errors.As(err, &pe) {
		return err
	}
	return &PermanentError{Err: err}
}

// IsPermanent reports whether err is or wraps a [PermanentError].
func IsPermanent(err error) bool {
	var pe *PermanentError
	return errors.As(err, &pe)
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidMessage}, args...)...)
}
