package waitroom

// defaultKeyPrefix is the Redis key prefix used unless [WithKeyPrefix] is given.
const defaultKeyPrefix = "seckill:"

// maxIDLen is the longest sale or user ID accepted, in bytes.
const maxIDLen = 64

// validID reports whether id is a valid sale or user ID: 1 to 64 bytes of
// [A-Za-z0-9._@+-], the library's one ID rule (stock.ValidID), which keeps
// out ':' (the separator of entry values), braces (the hash tag) and
// everything else.
func validID(id string) bool {
	if len(id) == 0 || len(id) > maxIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '.' || c == '_' || c == '@' || c == '+' || c == '-') {
			return false
		}
	}
	return true
}

// roomKeys are the Redis keys of one sale's room; all share the hash tag
// {wr:<sale>}, so every script touches one Cluster slot.
type roomKeys struct {
	meta string // HASH settings and counters
	ent  string // HASH user -> entry (see lib.lua)
	pq   string // LIST the shuffled pre-queue, in admission order
	q    string // LIST entries that joined after the start, in join order
	adm  string // ZSET admitted user -> admission deadline (ms)
}

func newRoomKeys(prefix, sale string) roomKeys {
	base := prefix + "{wr:" + sale + "}:"
	return roomKeys{meta: base + "meta", ent: base + "ent", pq: base + "pq", q: base + "q", adm: base + "adm"}
}
