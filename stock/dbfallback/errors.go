package dbfallback

import "errors"

// Sentinel errors of this package. Bad input to Reserve, Release and the
// read calls wraps [stock.ErrInvalidArgument]; a bad activity or quota given
// to Open wraps [stock.ErrInvalidArgument]; a reservation ID reused for another
// user, quantity or activity wraps [stock.ErrIDConflict]. Denials (sold
// out, limit reached, …) are not errors: they are a [stock.Status] in the
// [stock.Result].
var (
	// ErrInvalidConfig reports bad configuration given to [New]: a nil
	// *gorm.DB, a *gorm.DB it cannot use (a dialect other than
	// MySQL/MariaDB ("mysql") or SQLite ("sqlite"), or a handle that is
	// inside a transaction: the Store runs its own transactions), a nil
	// clock or a bad table prefix.
	ErrInvalidConfig = errors.New("dbfallback: invalid configuration")

	// ErrPoolConflict reports an [Store.Open] of an activity whose pool
	// already exists with another quota, per-user limit or window. Nothing
	// was written.
	ErrPoolConflict = errors.New("dbfallback: activity already opened with other terms")
)
