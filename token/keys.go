package token

import "strings"

// defaultKeyPrefix is the Redis key prefix used unless [WithKeyPrefix] is given.
const defaultKeyPrefix = "seckill:"

// Limits on caller-supplied identifiers.
const (
	maxIDLen = 128
)

// validID reports whether s can be used as an activity or user ID: 1..128
// bytes and free of the hash-tag braces (an activity containing "}" would
// move keys to another Cluster slot).
func validID(s string) bool {
	return len(s) > 0 && len(s) <= maxIDLen && !strings.ContainsAny(s, "{}")
}

// poolKeys are the Redis keys of one activity's token pool; all share the
// hash tag {a:<activity>} so every script touches one Cluster slot.
type poolKeys struct {
	free  string // LIST of tokens not yet taken
	state string // HASH token -> "b:<user>" (bound) | "u:<user>" (used)
	owner string // HASH user -> token
	exp   string // ZSET token -> binding deadline (unix ms)
	meta  string // HASH issued, used
}

func (k poolKeys) all() []string { return []string{k.free, k.state, k.owner, k.exp, k.meta} }

func newPoolKeys(prefix, activity string) poolKeys {
	base := prefix + "{a:" + activity + "}:tok:"
	return poolKeys{
		free:  base + "free",
		state: base + "state",
		owner: base + "owner",
		exp:   base + "exp",
		meta:  base + "meta",
	}
}

// nonceKey is the replay-guard key of one signed URL nonce.
func nonceKey(prefix, activity, nonce string) string {
	return prefix + "{a:" + activity + "}:url:nonce:" + nonce
}
