package outbox

import (
	"errors"
	"reflect"

	"github.com/seckillkit/seckill/internal/lifecycle"
)

// Sentinel errors. Wrapped errors keep these in their chain; match them with
// [errors.Is].
var (
	// ErrNilTx is returned by [Writer.Write] when the transaction is nil.
	// The outbox never opens a transaction of its own there: the caller's
	// business rows and the outbox rows must commit together.
	ErrNilTx = errors.New("outbox: nil transaction")

	// ErrNilDB is returned when a *gorm.DB argument is nil.
	ErrNilDB = errors.New("outbox: nil database")

	// ErrNilPublisher is returned when a Publisher argument is nil.
	ErrNilPublisher = errors.New("outbox: nil publisher")

	// ErrInvalidMessage is returned for a message that cannot be stored or
	// published: empty topic, topic, key or msg ID too long.
	ErrInvalidMessage = errors.New("outbox: invalid message")

	// ErrDuplicateMsgID is returned (wrapped, with the database's error) by
	// [Writer.Write], and so by [Writer.SendOrStore]'s store, when a
	// message's MsgID is already in the table. It is the package's only
	// refusal (every other error is bad input or a failure), so it needs no
	// umbrella: errors.Is(err, ErrDuplicateMsgID) is the one check. It is
	// raised on the unique-key violation of MySQL/MariaDB (1062),
	// PostgreSQL (SQLSTATE 23505) or SQLite, or gorm.ErrDuplicatedKey when
	// the database translates errors.
	ErrDuplicateMsgID = errors.New("outbox: duplicate msg ID")

	// ErrInvalidOption is returned by the constructors for an option value
	// out of range, and by [Failed] for a limit below 1.
	ErrInvalidOption = errors.New("outbox: invalid option")

	// ErrUndelivered is returned by [Writer.SendOrStore] when the message
	// was neither published nor stored: the publish error and the store
	// error are joined to it. The caller must compensate (release the
	// reservation) and ask its client to retry.
	ErrUndelivered = errors.New("outbox: message neither published nor stored")

	// ErrUnsupportedDialect is returned by [NewRelay] when the database
	// dialect has no known claim strategy and none was chosen with
	// [WithClaimMode].
	ErrUnsupportedDialect = errors.New("outbox: unsupported database dialect")

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
