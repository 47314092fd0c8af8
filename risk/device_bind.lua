-- device_bind.lua: bind a device to the first user who presents it.
--
-- KEYS[1]  owner key  <prefix>risk:{d:<device>}:owner
-- ARGV[1]  user ID
-- ARGV[2]  binding TTL, ms
-- ARGV[3]  1 = refresh the TTL when the owner presents the device again
--
-- Returns {status, owner}:
--   1  bound now to ARGV[1] (first user, SET NX semantics)
--   2  already bound to ARGV[1]
--   0  bound to another user (owner returned)
local owner = redis.call('GET', KEYS[1])
if not owner then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return {1, ARGV[1]}
end
if owner == ARGV[1] then
  if ARGV[3] == '1' then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
  return {2, owner}
end
return {0, owner}
