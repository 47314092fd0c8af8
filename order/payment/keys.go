package payment

// eventKey is the replay guard of one provider's event:
// <prefix>payment:event:{<provider>:<event ID>}, a key used alone.
func eventKey(prefix, provider, id string) string {
	return prefix + "payment:event:{" + provider + ":" + id + "}"
}
