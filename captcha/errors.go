package captcha

import (
	"errors"
	"strconv"
)

// ErrRefused is the umbrella of every refusal of [Store.Verify]: each
// refusal sentinel below wraps it, so one errors.Is(err, ErrRefused) tells
// "the answer was refused" (ask the client again) from "the check could not
// be made" (a Redis failure, [ErrBadReply], a cancelled context: fail
// closed). No other error of the package wraps it.
var ErrRefused = errors.New("captcha: refused")

// refusal is a refusal sentinel: its own message, wrapping [ErrRefused].
type refusal struct{ msg string }

func (e *refusal) Error() string { return e.msg }
func (e *refusal) Unwrap() error { return ErrRefused }

// reason is a refusal of [PoW.Verify] that says why: its own message,
// wrapping one refusal sentinel (and so [ErrRefused]). Package-level
// values, so a refusal allocates nothing.
type reason struct {
	msg string
	is  error
}

func (e *reason) Error() string { return e.msg }
func (e *reason) Unwrap() error { return e.is }

// The reasons of [PoW.Verify]'s refusals.
var (
	errPoWMalformed  error = &reason{"captcha: wrong answer: pow payload malformed", ErrWrongAnswer}
	errPoWUnsolved   error = &reason{"captcha: wrong answer: pow number does not solve the challenge", ErrWrongAnswer}
	errPoWForged     error = &reason{"captcha: wrong answer: pow signature does not verify", ErrWrongAnswer}
	errPoWUnknownKey error = &reason{"captcha: challenge not found or expired: pow key not held", ErrNotFound}
	errPoWOtherID    error = &reason{"captcha: challenge not found or expired: pow challenge of another ID", ErrNotFound}
	errPoWExpired    error = &reason{"captcha: challenge not found or expired: pow challenge expired", ErrNotFound}
	errPoWRedeemed   error = &reason{"captcha: challenge not found or expired: pow challenge already redeemed", ErrNotFound}
)

// Verification refusals, returned by [Store.Verify] and [PoW.Verify]. Each is distinct so
// callers can count refusals by reason with [errors.Is], and each wraps
// [ErrRefused].
var (
	// ErrNotFound: no such challenge: the ID is unknown, malformed, already
	// solved, burnt by too many attempts, or expired. Redis deletes a
	// challenge when its TTL ends, so an expired challenge cannot be told
	// apart from one that never existed; there is no separate ErrExpired.
	// From [PoW.Verify]: a challenge expired, already redeemed, of another
	// ID or signed by a key no longer held (the error says which).
	ErrNotFound error = &refusal{"captcha: challenge not found or expired"}
	// ErrWrongAnswer: the answer is wrong; the challenge survives until the
	// attempt limit. From [Store.Verify] the error is an [*AttemptsError]
	// carrying the attempts left; from [PoW.Verify] (no attempt limit) it
	// says why: a malformed payload, a number that does not solve the
	// challenge, a signature that does not verify.
	ErrWrongAnswer error = &refusal{"captcha: wrong answer"}
	// ErrTooManyAttempts: the answer was wrong and the attempt limit is
	// reached; the challenge is deleted, so the client must fetch a new one.
	ErrTooManyAttempts error = &refusal{"captcha: too many attempts"}
	// ErrWrongUser: the challenge is bound to another user. Such a call does
	// not reveal whether the answer was right and does not use up an
	// attempt of the owner.
	ErrWrongUser error = &refusal{"captcha: challenge bound to another user"}
)

// Errors that signal a broken dependency or a programming error. None of
// them wraps [ErrRefused].
var (
	// ErrInvalidConfig: [New] was given a nil Redis client, a nil
	// [Generator] or an option out of range, [Letters] / [Arithmetic] a
	// length or [Style] out of range, or [NewPoW] / [PoW.SetKeys] a nil
	// client, a bad key set or a [PoWConfig] field out of range.
	ErrInvalidConfig = errors.New("captcha: invalid configuration")
	// ErrInvalidArgument: [Store.Generate] or [PoW.Generate] was given a
	// user ID longer than 256 bytes or a cost out of range, [PoW.Verify] a
	// user ID longer than 256 bytes, or [Solve] a challenge it cannot
	// solve.
	ErrInvalidArgument = errors.New("captcha: invalid argument")
	// ErrBadReply: Redis answered a script with an unexpected type or code.
	ErrBadReply = errors.New("captcha: unexpected reply from redis")
	// ErrGenerator: the Generator failed or returned an unusable puzzle
	// (empty answer, answer longer than the limit).
	ErrGenerator = errors.New("captcha: generator failed")
)

// AttemptsError is returned for a wrong answer that leaves attempts; it
// wraps [ErrWrongAnswer] and says how many attempts remain.
type AttemptsError struct {
	Remaining int
}

// Error implements error.
func (e *AttemptsError) Error() string {
	return ErrWrongAnswer.Error() + " (" + strconv.Itoa(e.Remaining) + " attempts left)"
}

// Unwrap returns [ErrWrongAnswer].
func (e *AttemptsError) Unwrap() error { return ErrWrongAnswer }
