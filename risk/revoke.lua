-- revoke.lua: end one session and announce it, in one atomic step.
--
-- KEYS[1]  session key  <prefix>risk:{s:<sha256(token)>}
-- ARGV[1]  pub/sub channel announcing revocations (not a key)
--          <prefix>risk:session:revoked
-- ARGV[2]  the token's hash: base64url SHA-256, as in KEYS[1] (the message;
--          never the raw token)
--
-- Returns the number of keys deleted: 1 the session ended now, 0 it was
-- unknown, expired or revoked before.
--
-- The hash is published even when the key was already gone: a session that
-- expired in Redis may still sit in an instance's AuthCache, and the
-- message makes it forget it. A hash that no cache holds changes nothing.
-- PUBLISH from a script works on Redis Cluster (the message is broadcast to
-- every node).
local n = redis.call('DEL', KEYS[1])
redis.call('PUBLISH', ARGV[1], ARGV[2])
return n
