package stock

// SoldOutFor reports whether this process refuses requestID for activity
// in-process: the activity is known sold out and requestID was not in the
// ledger when that was learnt. A request ID that won a unit before the sale
// sold out is not refused: its retry goes to Redis and gets its reservation
// back. Like [Deductor.SoldOut] it never calls Redis; use it in front of
// work that a retry must not repeat (a one-time captcha, an access token).
func (d *Deductor) SoldOutFor(activity, requestID string) bool {
	return d.refuseLocal(activity, requestID)
}
