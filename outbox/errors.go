package outbox

import (
	"errors"
	"reflect"

	"github.com/seckillkit/seckill/internal/lifecycle"
)

// Sentinel errors. Wrapped errors keep these in their chain; match them with
// [errors.Is].
var (
	// ErrInvalidConfig is wrapped by every error for bad configuration: a
	// nil collaborator given to a constructor ([NewRelay]'s db or
	// publisher, [NewSaramaPublisher]'s producer), an option value out of
	// range or nil ([WithLogger](nil), a table name [WithTable] rejects), a
	// database dialect [NewRelay] has no claim strategy for (choose one
	// with [WithClaimMode]).
	ErrInvalidConfig = errors.New("outbox: invalid configuration")

	// ErrInvalidArgument is wrapped by every error for a bad argument to a
	// call: a nil transaction or database ([Writer.Write] never opens a
	// transaction of its own: the caller's business rows and the outbox
	// rows must commit together), a nil publisher, a message that cannot
	// be stored or published (empty topic; topic, key, reservation ID or
	// msg ID too long), an empty reservation ID, a limit below 1, a
	// dialect [Schema] has no DDL for.
	ErrInvalidArgument = errors.New("outbox: invalid argument")

	// ErrDuplicateMsgID is returned (wrapped, with the database's error) by
	// [Writer.Write], and so by [Writer.SendOrStore]'s store, when a
	// message's MsgID is already in the table. It is the package's only
	// refusal (every other error is bad input or a failure), so it needs no
	// umbrella: errors.Is(err, ErrDuplicateMsgID) is the one check. It is
	// raised on the unique-key violation of MySQL/MariaDB (1062),
	// PostgreSQL (SQLSTATE 23505) or SQLite, or gorm.ErrDuplicatedKey when
	// the database translates errors.
	ErrDuplicateMsgID = errors.New("outbox: duplicate msg ID")

	// ErrUndelivered is returned by [Writer.SendOrStore] when the message
	// was neither published nor stored: the publish error and the store
	// error are joined to it. The caller must compensate (release the
	// reservation) and ask its client to retry.
	ErrUndelivered = errors.New("outbox: message neither published nor stored")

	// ErrRunning is returned by [Relay.Run] when the relay is already
	// running. It is the sentinel every seckill package re-exports
	// (lifecycle.ErrRunning), so one errors.Is matches "already running"
	// whichever package answered.
	ErrRunning = lifecycle.ErrRunning

	// ErrClosed is returned by [Relay.Run] after [Relay.Close]. It is the
	// sentinel every seckill package re-exports (lifecycle.ErrClosed).
	ErrClosed = lifecycle.ErrClosed
)

// isNil reports whether v is nil or an interface holding a nil pointer,
// map, func, chan or slice (a (*SaramaPublisher)(nil) passed as a
// Publisher): a nil collaborator either way.
func isNil(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Func, reflect.Interface, reflect.Slice, reflect.Chan:
		return rv.IsNil()
	}
	return false
}
