package draw

const defaultKeyPrefix = "seckill:"

// validID is the library's one ID rule (stock.ValidID): 1 to 64 bytes of
// [A-Za-z0-9._@+-].
func validID(id string) bool {
	if len(id) == 0 || len(id) > 64 {
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

// drawKeys are the Redis keys of one sale's draw; all share the hash tag
// {dr:<sale>}, so every script touches one Cluster slot.
type drawKeys struct {
	meta string // HASH commit, closed, count, seed, stock, wait, w, done, next
	ent  string // HASH user -> entry (see write.lua)
	ord  string // LIST the draw order
}

func newDrawKeys(prefix, sale string) drawKeys {
	base := prefix + "{dr:" + sale + "}:"
	return drawKeys{meta: base + "meta", ent: base + "ent", ord: base + "ord"}
}
