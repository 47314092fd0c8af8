package order

// MessageVersion is the version of the "v" field [Message.Encode]
// writes; decoders accept versions 1..MessageVersion and ignore unknown
// fields.
//
//   - Version 1: user_id and activity_id are JSON numbers (positive int64).
//   - Version 2 adds [Message.Ext], still with numeric IDs.
//   - Version 3: user_id and activity_id are JSON strings ([ValidID]); Ext
//     as in version 2.
//   - Version 4 adds [Message.Lines] (an order with lines); otherwise as
//     version 3.
//
// Encode writes version 3 for a message without lines and version 4 for
// one with lines, so a consumer that predates lines reads every message it
// can and refuses a cart by its version (a [PermanentError],
// dead-lettered) instead of misreading it as an order without lines:
// upgrade consumers before producers. Messages of versions
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
	MessageVersion      = 4
	MaxIDLen            = 64
	MaxReservationIDLen = 128
)
