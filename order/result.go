package order

import "time"

// Status is the state of a purchase as the user sees it.
type Status string

// Statuses of a [Result].
const (
	// StatusNone: nothing known about this (activity, user).
	StatusNone Status = ""
	// StatusQueued: reserved and queued; the order is not written yet.
	StatusQueued Status = "QUEUED"
	// StatusSuccess: the order exists (OrderNo is set).
	StatusSuccess Status = "SUCCESS"
	// StatusFailed: no live order; Reason says why and the reservation was
	// released. An order that was cancelled (unpaid at expiry, or by
	// request) is FAILED with Reason status.ReasonCancelled and keeps its
	// OrderNo, so a caller can tell it from a buy that never became an
	// order and show it as cancelled.
	StatusFailed Status = "FAILED"
)

// Reasons of a FAILED [Result] and [Outcome].
const (
	ReasonSoldOut         = "sold_out"         // the DB stock guard refused (Redis/DB drift)
	ReasonDuplicate       = "duplicate"        // the reservation or the (user, activity) already has an order
	ReasonUnknownActivity = "unknown_activity" // no such activity row
	ReasonLimit           = "limit_reached"    // the buyer's live orders would exceed the activity's cap (DB check)
)

// Result is the status of one (activity, user), as polled by GET /result or
// pushed by a [Notifier].
type Result struct {
	Activity      string // the activity ID ([ValidID])
	User          string // the buyer's ID ([ValidID])
	Status        Status
	OrderNo       string // set when Status is SUCCESS, and for a cancelled order (FAILED, status.ReasonCancelled)
	Reason        string // set when Status is FAILED
	ReservationID string
	At            time.Time
	// Lines are the lines of an order with lines ([Message.Lines]), each
	// with its own state, when the answer comes from the database
	// (status.Results with a database); nil otherwise.
	Lines []Line
}
