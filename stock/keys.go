package stock

import "strconv"

// DefaultKeyPrefix is the key prefix used when [WithKeyPrefix] is not given.
const DefaultKeyPrefix = "seckill:"

// keys holds every Redis key of one activity. All of them share the hash tag
// {a:<activity>}, so one script touches one Cluster slot. They are built here
// and only here, and always passed to scripts in KEYS, in this order.
type keys struct {
	meta   string // hash: stock, total, limit, start, end, exp
	buyers string // hash: user -> held qty
	ledger string // hash: requestID -> "user:qty:state:atMs[:relMs]"
}

// tag returns "<prefix>{a:<activity>}:".
func tag(prefix string, activity int64) string {
	b := make([]byte, 0, len(prefix)+24)
	b = append(b, prefix...)
	b = append(b, "{a:"...)
	b = strconv.AppendInt(b, activity, 10)
	b = append(b, "}:"...)
	return string(b)
}

func activityKeys(prefix string, activity int64) keys {
	t := tag(prefix, activity)
	return keys{meta: t + "meta", buyers: t + "buyers", ledger: t + "resv"}
}

// list returns the keys in the order every script expects them.
func (k keys) list() []string { return []string{k.meta, k.buyers, k.ledger} }

// releaseChannel is the pub/sub channel on which release.lua announces that
// stock came back (the message is the activity ID). Not a key: pub/sub
// channels are not hashed to slots for classic PUBLISH.
func releaseChannel(prefix string) string { return prefix + "stock:released" }
