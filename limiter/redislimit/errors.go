package redislimit

import "errors"

// ErrBadReply is returned, wrapped in [limiter.ErrUnavailable], when Redis
// answers a script with a reply of an unexpected shape. Every other error
// of this package wraps a sentinel of package limiter
// ([limiter.ErrInvalidConfig], [limiter.ErrInvalidArgument],
// [limiter.ErrUnavailable]), so one errors.Is works whichever limiter
// answered.
var ErrBadReply = errors.New("redislimit: unexpected reply from redis")
