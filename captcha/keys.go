package captcha

import "encoding/hex"

// defaultKeyPrefix is the Redis key prefix used unless [WithKeyPrefix] is given.
const defaultKeyPrefix = "seckill:"

// challengeKey is the HASH of one challenge: a (normalised answer),
// u (bound user or ""), n (wrong attempts). The whole key after the prefix
// is its own hash tag: every script touches exactly this one key.
func challengeKey(prefix, id string) string {
	return prefix + "captcha:{" + id + "}"
}

// powKeyOf is the STRING recording that the proof-of-work challenge whose
// SHA-256 is sum was redeemed. Keyed by the challenge, not the salt, so a
// payload rewritten to the same challenge is the same record. The whole
// key after the prefix is its own hash tag: the script touches this one
// key.
func powKeyOf(prefix string, sum []byte) string {
	var h [64]byte
	hex.Encode(h[:], sum)
	return prefix + "captcha:pow:{" + string(h[:]) + "}"
}
