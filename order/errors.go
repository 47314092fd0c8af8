package order

import (
	"errors"
	"fmt"
)

// Sentinel errors. Business denials of Pay and Cancel are reported with these
// sentinels so callers can branch with errors.Is; infrastructure failures are
// wrapped with a "order: ..." prefix and %w.
var (
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

	// ErrActivityNotFound is returned by reconcile.Reconciler.Reconcile when the
	// activity has no seckill_activity row; nothing is released for it
	// (Report.ActivityMissing).
	ErrActivityNotFound = errors.New("order: activity not found")

	// ErrNoDeadLetter is returned from [Consumer.Consume] when a message is
	// permanent (poison) and no dead-letter sink was configured: the
	// consumer stops rather than skipping the message silently.
	ErrNoDeadLetter = errors.New("order: poison message and no dead-letter sink configured")

	// ErrInvalidConfig is returned by constructors and functions given an
	// invalid option or a missing collaborator (an invalid table name, a
	// nil db or logger, a non-positive pay timeout, a dialect [Schema] has
	// no DDL for, …).
	ErrInvalidConfig = errors.New("order: invalid configuration")

	// ErrInvalidArgument is returned by calls given a bad argument other
	// than an ID (those are [ErrInvalidID]): a payment reference that is
	// empty or too long, an unknown restock choice (status.Canceller.PayRef,
	// status.Canceller.Refund).
	ErrInvalidArgument = errors.New("order: invalid argument")
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

// isPermanent reports whether err is or wraps a [PermanentError].
func isPermanent(err error) bool {
	var pe *PermanentError
	return errors.As(err, &pe)
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidMessage}, args...)...)
}
