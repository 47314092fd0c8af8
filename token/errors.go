package token

import "errors"

// Errors returned when a credential fails verification. Each is a distinct
// sentinel so callers can count refusals by reason with [errors.Is].
var (
	// ErrMalformed: a signed URL token, a pool token, an activity or a user
	// ID is not in the expected format (bad encoding, wrong length, bad
	// version, characters that would break the Redis hash tag).
	ErrMalformed = errors.New("token: malformed")
	// ErrInvalidSignature: the signed URL's HMAC does not match its content
	// (forged or altered).
	ErrInvalidSignature = errors.New("token: invalid signature")
	// ErrUnknownKey: the signed URL names a key ID the [Signer] does not hold
	// (never known, or rotated out and retired).
	ErrUnknownKey = errors.New("token: unknown key")
	// ErrNotYetValid: the signed URL's not-before lies in the future, beyond
	// the clock-skew tolerance.
	ErrNotYetValid = errors.New("token: not yet valid")
	// ErrExpired: the signed URL's expiry, or the pool token's binding TTL,
	// has passed.
	ErrExpired = errors.New("token: expired")
	// ErrReplayed: the signed URL's one-time nonce was already used.
	ErrReplayed = errors.New("token: replayed")
	// ErrWrongUser: the credential was issued to, or is bound to, another user.
	ErrWrongUser = errors.New("token: wrong user")
	// ErrWrongActivity: the signed URL was issued for another activity.
	ErrWrongActivity = errors.New("token: wrong activity")
	// ErrTooEarly: [Signer.Sign] was asked for a URL before the release time
	// (activity start minus the lead time).
	ErrTooEarly = errors.New("token: not released yet")
	// ErrNotFound: the pool token is unknown to the activity: never issued,
	// still in the pool (never taken) or already returned to it after expiry.
	ErrNotFound = errors.New("token: not found")
	// ErrUsed: the pool token was already consumed.
	ErrUsed = errors.New("token: already used")
)

// Errors that signal a broken dependency or a programming error rather than
// a refused credential.
var (
	// ErrBadReply: Redis answered a script with an unexpected type or code.
	ErrBadReply = errors.New("token: unexpected reply from redis")
	// ErrNoKeys: the Signer was given no key, a secret shorter than 16
	// bytes, an invalid key ID or a duplicate key ID.
	ErrNoKeys = errors.New("token: invalid key set")
	// ErrInvalidConfig: an option of [NewPool] or [NewSigner] is out of range
	// (a negative skew, a zero validity, a nil clock, ...) or NewPool was
	// given a nil Redis client.
	ErrInvalidConfig = errors.New("token: invalid config")
)
