package status

// All Redis keys of this package. Each is touched alone by its commands and
// scripts, so no two keys need to share a hash slot; the activity tag keeps
// an activity's results on one Cluster node.

// resultKey: hash {status, order_no, reason, resv, at} per (activity,
// user). Both are [order.ValidID]s: no brace can move the hash tag, and no ':'
// can make two pairs share a key.
func resultKey(prefix, activity, user string) string {
	return prefix + "{a:" + activity + "}:result:" + user
}

// cancelQueueKey: sorted set of order numbers scored by cancel time (unix ms).
func cancelQueueKey(prefix string) string { return prefix + "{order:cancel}:queue" }
