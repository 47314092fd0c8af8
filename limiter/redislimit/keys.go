package redislimit

// Redis keys. Each script touches exactly one key, so any slot works on a
// Cluster; the key still carries a hash tag around the limiter name and the
// caller's key so that every key of one (limiter, key) pair — today one —
// would stay in one slot, and different callers spread over the slots.
//
//	<prefix>{sw:<name>:<key>}   sorted set: the sliding log of SlidingWindow
//	<prefix>{tb:<name>:<key>}   string: the GCRA arrival time of Bucket
//
// A caller key containing '{' or '}' only shortens the tag; it cannot make
// two scripts' keys cross slots, since no script takes two keys.

func windowKey(prefix, name, key string) string {
	return prefix + "{sw:" + name + ":" + key + "}"
}

func bucketKey(prefix, name, key string) string {
	return prefix + "{tb:" + name + ":" + key + "}"
}
