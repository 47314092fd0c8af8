package draw

import "errors"

// ErrRefused is the umbrella of every refusal: [ErrWindowClosed] wraps it.
// Redis failures, invalid input and cancelled contexts never wrap it.
var ErrRefused = errors.New("draw: refused")

type refusal struct{ msg string }

func (e *refusal) Error() string { return e.msg }
func (e *refusal) Unwrap() error { return ErrRefused }

// ErrWindowClosed: [Drawer.Enter] after [Drawer.Close], by a user who did
// not enter before. Wraps [ErrRefused].
var ErrWindowClosed error = &refusal{"draw: entries closed"}

var (
	// ErrBadReply: Redis answered a script with an unexpected type or code.
	ErrBadReply = errors.New("draw: unexpected reply from redis")
	// ErrInvalidConfig: a nil Redis client.
	ErrInvalidConfig = errors.New("draw: invalid configuration")
	// ErrInvalidArgument: a sale or user ID that is not 1–64 bytes of
	// [A-Za-z0-9._@+-], a sale not opened, a commitment that is not a hex
	// SHA-256 or differs from the one set, a seed that does not match it,
	// a draw before Close or with another stock or waitlist than a first
	// call, a negative stock or waitlist, Replace of a user who is not a
	// winner or before the draw, or a published draw that does not verify
	// ([Verify]).
	ErrInvalidArgument = errors.New("draw: invalid argument")
)
