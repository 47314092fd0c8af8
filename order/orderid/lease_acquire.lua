-- lease_acquire.lua: take a machine-ID lease if nobody holds it.
-- KEYS[1] lease key   (string: owner token, PX ttl)
-- KEYS[2] floor key   (string: highest ms used by any owner; no TTL)
-- ARGV[1] owner token
-- ARGV[2] lease TTL in milliseconds
-- Returns: -1 when the lease is held by someone else; otherwise the floor
--          (0 when never set) — the new owner must issue IDs above it.
-- Time: none read; the TTL is Redis's.
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return -1
end
local f = redis.call('GET', KEYS[2])
if not f then
  return 0
end
return tonumber(f)
