package risk

// Key layout. Every key is "<prefix>risk:{<tag>}:<field>": one hash tag per
// subject, so the two keys of one blacklist entry (ban + offence counter)
// share a Cluster slot and one script can touch both. Keys of different
// subjects are spread over the Cluster.
//
//	<prefix>risk:{s:<sha256(token)>}        session → user ID (STRING, TTL)
//	<prefix>risk:{bl:<kind>:<id>}:ban       active ban (STRING "until|offence|reason", TTL = ban)
//	                                        (<id> of an IP network: CIDR, "203.0.113.0/24")
//	<prefix>risk:{bl:<kind>:<id>}:n         offence counter (INT, TTL = offence memory)
//	<prefix>risk:{bl:<kind>}:until          ban index of a kind (ZSET id → end ms, +inf permanent)
//	<prefix>risk:{bl:<kind>}:ids            ban index of a kind (ZSET id → 0, lexical paging)
//	<prefix>risk:{u:<user>}:beh             behaviour window (ZSET of events, TTL = window)
//	<prefix>risk:{d:<device>}:owner         device binding (STRING user ID, TTL = binding TTL)

func sessionKey(prefix, tokenHash string) string {
	return prefix + "risk:{s:" + tokenHash + "}"
}

func banKey(prefix string, kind Kind, id string) string {
	return prefix + "risk:{bl:" + string(kind) + ":" + id + "}:ban"
}

func offenceKey(prefix string, kind Kind, id string) string {
	return prefix + "risk:{bl:" + string(kind) + ":" + id + "}:n"
}

// banIndexKeys are the two keys of the ban index of kind (one hash tag per
// kind: see blacklist_index.lua).
func banIndexKeys(prefix string, kind Kind) []string {
	tag := prefix + "risk:{bl:" + string(kind) + "}"
	return []string{tag + ":until", tag + ":ids"}
}

func behaviourKey(prefix, user string) string {
	return prefix + "risk:{u:" + user + "}:beh"
}

func deviceKey(prefix, device string) string {
	return prefix + "risk:{d:" + device + "}:owner"
}
