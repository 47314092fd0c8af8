package dbfallback

import "errors"

// Sentinel errors of this package. Bad input to Reserve, Release and the
// read calls wraps [stock.ErrInvalidRequest]; a bad activity or quota given
// to Open wraps [stock.ErrInvalidActivity]; a reservation ID reused for another
// user, quantity or activity wraps [stock.ErrIDConflict]. Denials (sold
// out, limit reached, …) are not errors: they are a [stock.Status] in the
// [stock.Result].
var (
	// ErrNilDB reports a nil *gorm.DB given to [New].
	ErrNilDB = errors.New("dbfallback: nil *gorm.DB")

	// ErrUnsupported reports a *gorm.DB that [New] cannot use: a dialect
	// other than MySQL/MariaDB ("mysql") or SQLite ("sqlite"), or a handle
	// that is inside a transaction (the Store runs its own transactions).
	ErrUnsupported = errors.New("dbfallback: unsupported database handle")

	// ErrPoolConflict reports an [Store.Open] of an activity whose pool
	// already exists with another quota, per-user limit or window. Nothing
	// was written.
	ErrPoolConflict = errors.New("dbfallback: activity already opened with other terms")
)
