package order

// MessageVersion is the version of the "v" field [Message.Encode]
// writes; decoders accept versions 1..MessageVersion and ignore unknown
// fields.
//
//   - Version 1: user_id and activity_id are JSON numbers (positive int64).
//   - Version 2 adds [Message.Ext], still with numeric IDs.
//   - Version 3: user_id and activity_id are JSON strings ([ValidID]); Ext
//     as in version 2.
//
// Encode always writes version 3, so a consumer that predates it refuses
// the message by its version (a [PermanentError], dead-lettered) instead of
// misreading it: upgrade consumers before producers. Messages of versions
// 1 and 2 still decode; their numeric IDs become their decimal strings
// (7 → "7"), so an order written from an old message and one written from
// a new message for the same user compare equal.
//
// MaxIDLen and MaxReservationIDLen are the longest IDs the package
// accepts, in bytes: the VARCHAR(64) of the user_id and activity_id
// columns and the VARCHAR(128) of the reservation_id columns (the stock
// package has the same limits, stock.MaxIDLen and
// stock.MaxReservationIDLen).
const (
	MessageVersion      = 3
	MaxIDLen            = 64
	MaxReservationIDLen = 128
)
