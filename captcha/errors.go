package captcha

import (
	"errors"
	"strconv"
)

// Verification refusals, returned by [Store.Verify]. Each is distinct so
// callers can count refusals by reason with [errors.Is].
var (
	// ErrNotFound: no such challenge: the ID is unknown, malformed, already
	// solved, burnt by too many attempts, or expired. Redis deletes a
	// challenge when its TTL ends, so an expired challenge cannot be told
	// apart from one that never existed; there is no separate ErrExpired.
	ErrNotFound = errors.New("captcha: challenge not found or expired")
	// ErrWrongAnswer: the answer is wrong; the challenge survives until the
	// attempt limit. The error is an [*AttemptsError] carrying the attempts left.
	ErrWrongAnswer = errors.New("captcha: wrong answer")
	// ErrTooManyAttempts: the answer was wrong and the attempt limit is
	// reached; the challenge is deleted, so the client must fetch a new one.
	ErrTooManyAttempts = errors.New("captcha: too many attempts")
	// ErrWrongUser: the challenge is bound to another user. Such a call does
	// not reveal whether the answer was right and does not use up an
	// attempt of the owner.
	ErrWrongUser = errors.New("captcha: challenge bound to another user")
)

// Errors that signal a broken dependency or a programming error.
var (
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
