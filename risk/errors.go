package risk

import (
	"errors"

	"github.com/seckillkit/seckill/internal/lifecycle"
)

// ErrClosed is returned by [AuthCache.Run] after [AuthCache.Close];
// ErrRunning by a Run while another Run is active. They are the sentinels
// every seckill package shares for this (stock.ErrClosed, order.ErrClosed
// … are the same value).
var (
	ErrClosed  = lifecycle.ErrClosed
	ErrRunning = lifecycle.ErrRunning
)

// ErrRefused is the umbrella of the package's only denials that are
// errors, the credential refusals of the auth path: [ErrNoToken],
// [ErrMalformedToken] and [ErrInvalidToken] wrap it, so one
// errors.Is(err, ErrRefused) tells "answer 401" from "the check could not
// be made" ([ErrUnavailable], a Redis failure, a cancelled context: 503)
// and from a programming error ([ErrInvalidConfig], [ErrInvalidArgument]). Every other denial
// of the package is a result, a [Decision] with Action [Deny] (Throttled
// for a frequency deny) or [Challenge], never an error.
var ErrRefused = errors.New("risk: refused")

// refusal is a refusal sentinel: its own message, wrapping [ErrRefused].
type refusal struct{ msg string }

func (e *refusal) Error() string { return e.msg }
func (e *refusal) Unwrap() error { return ErrRefused }

// Sentinel errors. Denials of a request are never errors: a refused request
// is a [Decision] with Action [Deny] or [Challenge]. Errors mean
// a credential failed verification (the auth path: each wraps
// [ErrRefused]) or a dependency / input is broken (none wraps it).
var (
	// ErrNoToken is returned when a request carries no bearer token. It
	// wraps [ErrRefused].
	ErrNoToken error = &refusal{"risk: no bearer token"}

	// ErrMalformedToken is returned when the Authorization header is not a
	// well-formed "Bearer <token>" (RFC 6750 b64token, at most 4096 bytes).
	// It wraps [ErrRefused].
	ErrMalformedToken error = &refusal{"risk: malformed bearer token"}

	// ErrInvalidToken is returned by an [Authenticator] when the token is
	// unknown, expired or revoked. It wraps [ErrRefused]. Authenticators
	// written by users should wrap it (fmt.Errorf("...: %w",
	// risk.ErrInvalidToken)) so the [NewAuth] middleware answers 401
	// rather than 503.
	ErrInvalidToken error = &refusal{"risk: invalid or expired token"}

	// ErrUnavailable wraps a dependency failure (Redis down, timeout) that
	// made a check impossible. The [Checker] returns it under
	// [FailClosed]; the middlewares answer 503.
	ErrUnavailable = errors.New("risk: unavailable")

	// ErrBadReply means Redis answered a script with an unexpected type.
	ErrBadReply = errors.New("risk: unexpected reply from redis")

	// ErrInvalidConfig is returned by a constructor given bad
	// configuration: a nil collaborator (client, checker, authenticator,
	// logger), a setting or option out of range, a trusted proxy that does
	// not parse; and by [AuthCache.Run] on a cache built without
	// [AuthCacheConfig.Revocations].
	ErrInvalidConfig = errors.New("risk: invalid configuration")

	// ErrInvalidArgument is returned, before any Redis command is sent,
	// for a bad argument to a call: a user ID that is not [ValidUserID] or
	// a device ID that is not [ValidDeviceID] (empty, longer than 128
	// bytes, bad characters), an IP or kind that does not parse, a
	// duration or list limit out of range. As a [Rule], each type denies a
	// subject with a bad ID instead ([ReasonInvalidUser],
	// [ReasonInvalidDevice]).
	ErrInvalidArgument = errors.New("risk: invalid argument")
)
