package order

import "strconv"

// All Redis keys of this package. Each is touched alone by its commands and
// scripts, so no two keys need to share a hash slot; the activity tag keeps
// an activity's results on one Cluster node.

// resultKey: hash {status, order_no, reason, resv, at} per (activity,
// user). Both are [ValidID]s: no brace can move the hash tag, and no ':'
// can make two pairs share a key.
func resultKey(prefix, activity, user string) string {
	return prefix + "{a:" + activity + "}:result:" + user
}

// cancelQueueKey: sorted set of order numbers scored by cancel time (unix ms).
func cancelQueueKey(prefix string) string { return prefix + "{order:cancel}:queue" }

// machineKey: lease of one machine ID (value: owner token, PX = lease TTL).
func machineKey(prefix string, id int64) string {
	return prefix + "{idgen:" + strconv.FormatInt(id, 10) + "}:lease"
}

// machineFloorKey: highest millisecond the owner of a machine ID has used
// (no TTL), so the next owner starts above it. Same tag as machineKey.
func machineFloorKey(prefix string, id int64) string {
	return prefix + "{idgen:" + strconv.FormatInt(id, 10) + "}:floor"
}
