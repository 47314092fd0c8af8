package token

import "errors"

// ErrRefused is the umbrella of every refusal: each refusal sentinel below
// wraps it, so one errors.Is(err, ErrRefused) tells "the credential was
// refused" (answer 403 or "try again") from "the check could not be made"
// (a Redis failure, a bad reply: fail closed, answer 503) and from a
// programming error ([ErrInvalidArgument], [ErrInvalidConfig]).
// A context error (cancelled, deadline) is never a refusal.
var ErrRefused = errors.New("token: refused")

// refusal is a refusal sentinel: its own message, wrapping [ErrRefused].
type refusal struct{ msg string }

func (e *refusal) Error() string { return e.msg }
func (e *refusal) Unwrap() error { return ErrRefused }

// Refusals: a credential failed verification. Each is a distinct sentinel
// so callers can count refusals by reason with [errors.Is], and each wraps
// [ErrRefused].
var (
	// ErrMalformed: a signed URL token or a pool token is not in the
	// expected format (bad encoding, wrong length, bad version).
	ErrMalformed error = &refusal{"token: malformed"}
	// ErrInvalidSignature: the signed URL's HMAC does not match its content
	// (forged or altered).
	ErrInvalidSignature error = &refusal{"token: invalid signature"}
	// ErrUnknownKey: the signed URL names a key ID the [Signer] does not hold
	// (never known, or rotated out and retired).
	ErrUnknownKey error = &refusal{"token: unknown key"}
	// ErrNotYetValid: the signed URL's not-before lies in the future, beyond
	// the clock-skew tolerance.
	ErrNotYetValid error = &refusal{"token: not yet valid"}
	// ErrExpired: the signed URL's expiry, or the pool token's binding TTL,
	// has passed.
	ErrExpired error = &refusal{"token: expired"}
	// ErrReplayed: the signed URL's one-time nonce was already used.
	ErrReplayed error = &refusal{"token: replayed"}
	// ErrWrongUser: the credential was issued to, or is bound to, another user.
	ErrWrongUser error = &refusal{"token: wrong user"}
	// ErrWrongActivity: the signed URL was issued for another activity.
	ErrWrongActivity error = &refusal{"token: wrong activity"}
	// ErrTooEarly: [Signer.Sign] was asked for a URL before the release time
	// (activity start minus the lead time).
	ErrTooEarly error = &refusal{"token: not released yet"}
	// ErrNotFound: the pool token is unknown to the activity: never issued,
	// still in the pool (never taken) or already returned to it after expiry.
	ErrNotFound error = &refusal{"token: not found"}
	// ErrUsed: the pool token was already consumed.
	ErrUsed error = &refusal{"token: already used"}
)

// Errors that signal a broken dependency or a programming error rather than
// a refused credential. None of them wraps [ErrRefused].
var (
	// ErrBadReply: Redis answered a script with an unexpected type or code.
	ErrBadReply = errors.New("token: unexpected reply from redis")
	// ErrInvalidConfig: an option of [NewPool] or [NewSigner] is out of range
	// (a negative skew, a zero validity, a nil clock, ...), NewPool was
	// given a nil Redis client, or [NewSigner] or [Signer.SetKeys] a bad key
	// set (no key, a secret shorter than 16 bytes, an invalid or duplicate
	// key ID).
	ErrInvalidConfig = errors.New("token: invalid configuration")
	// ErrInvalidArgument: the caller passed an activity or user ID that is
	// not 1..128 bytes without braces, a stock out of range to [Pool.Issue],
	// or [SignParams] without a start or with an expiry not after it.
	// Checked before any Redis call. Unlike [ErrMalformed], which refuses a
	// credential presented by a client, it is the caller's own mistake.
	ErrInvalidArgument = errors.New("token: invalid argument")
)
