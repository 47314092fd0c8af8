package stock

import "context"

// SoldOutFor reports whether this process refuses reservationID for activity
// in-process: the activity is known sold out and reservationID was not in the
// ledger when that was learnt. A reservation ID that won a unit before the sale
// sold out is not refused: its retry goes to Redis and gets its reservation
// back. Like [Deductor.SoldOut] it never calls Redis; use it in front of
// work that a retry must not repeat (a one-time captcha, an access token).
// For an activity with variants (its plain ID) it is true when every
// variant of the learnt list is refused in-process and reservationID was in
// none of their ledgers.
func (d *Deductor) SoldOutFor(activity, reservationID string) bool {
	ctx := context.Background()
	if set := d.soldOutSet(ctx, activity); set != nil {
		_, known := set.ids[reservationID]
		return !known
	}
	acts := d.varsOf(activity).acts
	for _, a := range acts {
		set := d.soldOutSet(ctx, a)
		if set == nil {
			return false
		}
		if _, known := set.ids[reservationID]; known {
			return false
		}
	}
	return len(acts) > 0
}

// SoldOutForPrefix reports whether this process refuses, in-process, every
// reservation ID of activity that starts with prefix: the activity is known
// sold out and no ID in the ledger, when that was learnt, starts with
// prefix. When it is true, SoldOutFor is true for each such ID. A caller
// whose reservation IDs start with a prefix of the buyer's own that no other
// buyer's IDs start with (e.g. "u<len(user)>.<user>-<attempt>") can so
// refuse a buyer who won nothing before reading the request's attempt ID
// at all. For an activity with variants (its plain ID) it is true when
// every variant of the learnt list is refused in-process and no ID in any
// of their ledgers starts with prefix (a variant's ledger holds the IDs
// its Reserve calls gave, whatever they append to the prefix). One binary
// search over the ledger's sorted IDs (one per variant); never calls
// Redis.
func (d *Deductor) SoldOutForPrefix(activity, prefix string) bool {
	ctx := context.Background()
	if set := d.soldOutSet(ctx, activity); set != nil {
		return !set.hasPrefix(prefix)
	}
	acts := d.varsOf(activity).acts
	for _, a := range acts {
		set := d.soldOutSet(ctx, a)
		if set == nil || set.hasPrefix(prefix) {
			return false
		}
	}
	return len(acts) > 0
}
