package captcha

// defaultKeyPrefix is the Redis key prefix used unless [WithKeyPrefix] is given.
const defaultKeyPrefix = "seckill:"

// challengeKey is the HASH of one challenge: a (normalised answer),
// u (bound user or ""), n (wrong attempts). The whole key after the prefix
// is its own hash tag: every script touches exactly this one key.
func challengeKey(prefix, id string) string {
	return prefix + "captcha:{" + id + "}"
}
