package orderid

import "strconv"

// The Redis keys of a lease. Both keys of one machine ID share its tag,
// so the lease scripts run on one Cluster node.

// machineKey: lease of one machine ID (value: owner token, PX = lease TTL).
func machineKey(prefix string, id int64) string {
	return prefix + "{idgen:" + strconv.FormatInt(id, 10) + "}:lease"
}

// machineFloorKey: highest millisecond the owner of a machine ID has used
// (no TTL), so the next owner starts above it. Same tag as machineKey.
func machineFloorKey(prefix string, id int64) string {
	return prefix + "{idgen:" + strconv.FormatInt(id, 10) + "}:floor"
}
