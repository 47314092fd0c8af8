package stock

import (
	"strconv"
	"strings"
)

// defaultKeyPrefix is the key prefix used when [WithKeyPrefix] is not given.
const defaultKeyPrefix = "seckill:"

// maxShards is the largest [Activity.Shards] accepted.
const maxShards = 64

// clusterSlots is the number of Redis Cluster hash slots.
const clusterSlots = 16384

// keys holds every Redis key of one ledger: a whole un-sharded activity, or
// one shard of a sharded one. All of them share one hash tag, so one script
// touches one Cluster slot. They are built here and only here, and always
// passed to scripts in KEYS, in this order.
type keys struct {
	meta   string // hash: stock, total, limit, start, end, exp, the fence
	buyers string // hash: user -> held qty
	ledger string // hash: reservationID -> "user:qty:state:atMs[:relMs]"
	ever   string // hash: user -> units ever reserved (written only for an Activity.NoRebuy sale)
	adj    string // hash: adjustmentID -> "delta:atMs:stockAfter:totalAfter:requested" (Deductor.Adjust)
	ext    string // hash: reservationID -> its ReservedAt before its one hold extension (extend.lua); not in list
	// Shards only (empty for the un-sharded layout):
	xout string // hash: transferID -> "to:qty:epochTo:atMs", transfers out of this shard not yet settled
	xin  string // hash: transferID -> "A|V:from:qty:atMs", transfers into this shard, applied (A) or void (V)
}

// tag returns "<prefix>{a:<activity>}:", the tag of the un-sharded layout
// and of a sharded activity's directory.
func tag(prefix, activity string) string {
	return prefix + "{a:" + activity + "}:"
}

// activityKeys returns the keys of an un-sharded activity (or of a sharded
// activity's directory). The names are cut from one string: one
// allocation on the Reserve path of an activity not seen loaded yet. A
// variant "<activity>/<variant>" ([VariantOf]) has the same keys under its
// activity's hash tag: "<prefix>{a:<activity>}:v:<variant>:meta|...", so
// every ledger of one activity shares one Cluster slot.
func activityKeys(prefix, activity string) keys {
	suffixes := [...]string{"meta", "buyers", "resv", "ever", "adj", "ext"}
	parent, variant := activity, ""
	if i := strings.IndexByte(activity, variantSep); i >= 0 {
		parent, variant = activity[:i], activity[i+1:]
	}
	var b strings.Builder
	b.Grow(len(suffixes)*(len(prefix)+len(activity)+8) + 24)
	var end [len(suffixes)]int
	for i, s := range suffixes {
		b.WriteString(prefix)
		b.WriteString("{a:")
		b.WriteString(parent)
		b.WriteString("}:")
		if variant != "" {
			b.WriteString("v:")
			b.WriteString(variant)
			b.WriteByte(':')
		}
		b.WriteString(s)
		end[i] = b.Len()
	}
	all := b.String()
	return keys{meta: all[:end[0]], buyers: all[end[0]:end[1]], ledger: all[end[1]:end[2]], ever: all[end[2]:end[3]],
		adj: all[end[3]:end[4]], ext: all[end[4]:end[5]]}
}

// varsKey returns "<prefix>{a:<activity>}:vars", the hash of an activity
// with variants: list (the variant IDs, comma-separated, in load order),
// limit (the per-user limit over all variants), exp.
func varsKey(prefix, activity string) string { return tag(prefix, activity) + "vars" }

// groupKeys returns the keys of limit group g, under its own hash tag
// {g:<group>}: held (user -> units taken), ledger (line reservation ID
// -> "user:qty:state:atMs", state R taken, X given back, T tombstone) and
// meta (the group's data-loss fence: epoch, seq, born, origin, frozen).
func groupKeys(prefix, group string) []string {
	t := prefix + "{g:" + group + "}:"
	return []string{t + "held", t + "resv", t + "meta"}
}

// shardTagBody returns "a:<activity>:s<k>/<n>:<salt>", the inside of the
// hash tag of shard k of n.
func shardTagBody(activity string, n, k, salt int) []byte {
	b := make([]byte, 0, 24+len(activity))
	b = append(b, "a:"...)
	b = append(b, activity...)
	b = append(b, ":s"...)
	b = strconv.AppendInt(b, int64(k), 10)
	b = append(b, '/')
	b = strconv.AppendInt(b, int64(n), 10)
	b = append(b, ':')
	b = strconv.AppendInt(b, int64(salt), 10)
	return b
}

// shardSalt returns the smallest salt that puts the slot of shard k of n in
// the middle half of the k-th n-th of the slot space. Masters created by
// redis-cli --cluster create (or any even split) own equal contiguous slot
// ranges, so the n shards of an activity land on min(n, masters) masters,
// spread evenly, whatever the activity ID; a deterministic function of
// (activity, n, k), so every process finds the same keys without asking.
func shardSalt(activity string, n, k int) int {
	lo, hi := k*clusterSlots/n, (k+1)*clusterSlots/n
	q := (hi - lo) / 4
	lo, hi = lo+q, hi-q
	for salt := 0; salt < 1<<20; salt++ {
		if s := int(crc16(shardTagBody(activity, n, k, salt)) % clusterSlots); s >= lo && s < hi {
			return salt
		}
	}
	return 0 // not reached: CRC16 covers every range within a few thousand salts
}

// shardKeys returns the keys of shard k of an activity split into n shards:
// "<prefix>{a:<activity>:s<k>/<n>:<salt>}:meta|buyers|resv|ever|adj|xout|xin".
func shardKeys(prefix, activity string, n, k int) keys {
	body := shardTagBody(activity, n, k, shardSalt(activity, n, k))
	b := make([]byte, 0, len(prefix)+len(body)+3)
	b = append(b, prefix...)
	b = append(b, '{')
	b = append(b, body...)
	b = append(b, "}:"...)
	t := string(b)
	return keys{meta: t + "meta", buyers: t + "buyers", ledger: t + "resv", ever: t + "ever", adj: t + "adj",
		ext: t + "ext", xout: t + "xout", xin: t + "xin"}
}

// list returns the keys in the order every script expects them: meta,
// buyers, ledger, ever, adj, and for a shard also xout and xin.
func (k keys) list() []string {
	if k.xout == "" {
		return []string{k.meta, k.buyers, k.ledger, k.ever, k.adj}
	}
	return []string{k.meta, k.buyers, k.ledger, k.ever, k.adj, k.xout, k.xin}
}

// releaseChannel is the pub/sub channel on which release.lua announces that
// stock came back (the message is the activity ID). Not a key: pub/sub
// channels are not hashed to slots for classic PUBLISH.
func releaseChannel(prefix string) string { return prefix + "stock:released" }

// keySlot returns the Redis Cluster slot of key: CRC16 of its hash tag (the
// part between the first '{' and the next '}', when not empty) or of the
// whole key, modulo 16384.
func keySlot(key string) int {
	b := []byte(key)
	for i := 0; i < len(b); i++ {
		if b[i] == '{' {
			for j := i + 1; j < len(b); j++ {
				if b[j] == '}' {
					if j > i+1 {
						b = b[i+1 : j]
					}
					return int(crc16(b) % clusterSlots)
				}
			}
			break
		}
	}
	return int(crc16(b) % clusterSlots)
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021, initial value 0), the checksum
// Redis Cluster hashes keys with.
func crc16(b []byte) uint16 {
	var crc uint16
	for _, c := range b {
		crc ^= uint16(c) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}
