package stock

import "context"

// SoldOutFor reports whether this process refuses reservationID for activity
// in-process: the activity is known sold out and reservationID was not in the
// ledger when that was learnt. A reservation ID that won a unit before the sale
// sold out is not refused: its retry goes to Redis and gets its reservation
// back. Like [Deductor.SoldOut] it never calls Redis; use it in front of
// work that a retry must not repeat (a one-time captcha, an access token).
func (d *Deductor) SoldOutFor(activity, reservationID string) bool {
	return d.refuseLocal(context.Background(), activity, reservationID)
}

// SoldOutForPrefix reports whether this process refuses, in-process, every
// reservation ID of activity that starts with prefix: the activity is known
// sold out and no ID in the ledger, when that was learnt, starts with
// prefix. When it is true, SoldOutFor is true for each such ID. A caller
// whose reservation IDs start with a prefix of the buyer's own that no other
// buyer's IDs start with (e.g. "u<len(user)>.<user>-<attempt>") can so
// refuse a buyer who won nothing before reading the request's attempt ID
// at all. One binary search over the ledger's sorted IDs; never calls
// Redis.
func (d *Deductor) SoldOutForPrefix(activity, prefix string) bool {
	set := d.soldOutSet(context.Background(), activity)
	return set != nil && !set.hasPrefix(prefix)
}
