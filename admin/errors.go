package admin

import "errors"

// Errors a [Backend] wraps (with %w) to give the operator a specific answer;
// any other error is answered "internal".
var (
	// ErrNotFound: the activity, reservation or subject does not exist
	// (404 not_found).
	ErrNotFound = errors.New("admin: not found")
	// ErrConflict: the action does not fit the current state, e.g. a
	// withdrawal of more units than remain (409 conflict).
	ErrConflict = errors.New("admin: conflict")
	// ErrInvalidArgument: input the backend refuses (400 invalid_argument).
	// The handler's own validation uses it too.
	ErrInvalidArgument = errors.New("admin: invalid argument")
	// ErrUnavailable: a store the action needs is down; retry later (503
	// unavailable).
	ErrUnavailable = errors.New("admin: unavailable")
	// ErrForbidden: returned by an [Authenticator] for a known operator who
	// may not use the admin API (403 forbidden; any other authenticator
	// error is 401 unauthorized).
	ErrForbidden = errors.New("admin: forbidden")
	// ErrUnauthorized: returned by [BearerToken]'s authenticator when the
	// request carries no token or a wrong one (401 unauthorized).
	ErrUnauthorized = errors.New("admin: unauthorized")
	// ErrInvalidConfig: a nil collaborator or a bad option value of [New],
	// or a short secret or label key of [BearerToken].
	ErrInvalidConfig = errors.New("admin: invalid configuration")
)
