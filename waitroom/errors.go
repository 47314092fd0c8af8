package waitroom

import "errors"

// ErrRefused is the umbrella of every refusal: each refusal sentinel below
// wraps it, so one errors.Is(err, ErrRefused) tells "the credential was
// refused" (answer 403, or send the user back to the queue) from "the check
// could not be made" (a Redis failure, a bad reply: fail closed) and from a
// programming error ([ErrInvalidArgument], [ErrInvalidConfig]). A context
// error is never a refusal.
var ErrRefused = errors.New("waitroom: refused")

// refusal is a refusal sentinel: its own message, wrapping [ErrRefused].
type refusal struct{ msg string }

func (e *refusal) Error() string { return e.msg }
func (e *refusal) Unwrap() error { return ErrRefused }

// Refusals: a ticket or pass failed verification. Each wraps [ErrRefused].
var (
	// ErrMalformed: the ticket or pass is not in the expected format (bad
	// encoding, length, version, or a ticket presented as a pass and the
	// reverse).
	ErrMalformed error = &refusal{"waitroom: malformed credential"}
	// ErrInvalidSignature: the HMAC does not match the content (forged or
	// altered), or the key ID is not in the key set (never known, or
	// rotated out).
	ErrInvalidSignature error = &refusal{"waitroom: invalid signature"}
	// ErrExpired: the ticket or pass has expired, or the admission it
	// stands for has lapsed.
	ErrExpired error = &refusal{"waitroom: expired"}
	// ErrWrongUser: the credential was issued to another user or for
	// another sale.
	ErrWrongUser error = &refusal{"waitroom: issued to another user or sale"}
	// ErrNotAdmitted: the pass is genuine but its holder is not admitted
	// now: Done was called (a replay after use) or the entry was reset.
	ErrNotAdmitted error = &refusal{"waitroom: not admitted"}
)

// Errors that signal a broken dependency or a programming error. None
// wraps [ErrRefused].
var (
	// ErrBadReply: Redis answered a script with an unexpected type or code.
	ErrBadReply = errors.New("waitroom: unexpected reply from redis")
	// ErrInvalidConfig: a nil Redis client, an option out of range, or a
	// bad key set (no key, a secret shorter than 16 bytes, an invalid or
	// duplicate key ID).
	ErrInvalidConfig = errors.New("waitroom: invalid configuration")
	// ErrInvalidArgument: a sale or user ID that is not 1–64 bytes of
	// [A-Za-z0-9._@+-], a bad [Config], a sale that was never configured,
	// a seed that does not match the commitment, a shuffle started before
	// the start, or Done for a user never admitted. Checked before Redis
	// is touched where the call alone shows it.
	ErrInvalidArgument = errors.New("waitroom: invalid argument")
)
