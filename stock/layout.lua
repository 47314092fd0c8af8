-- layout.lua: read-only (run with EVALSHA_RO); how an activity is laid out.
--
-- KEYS[1] meta  hash  <prefix>{a:<id>}:meta: the un-sharded activity's meta,
--                     or the directory of a sharded one (field shards)
--
-- Returns {kind, shards}: kind 0 absent (shards 0), 1 un-sharded and loaded
-- (shards 1), 2 sharded (shards is the number of shards).

local m = redis.call('HMGET', KEYS[1], 'stock', 'shards')
if m[1] then
  return {1, 1}
end
if m[2] then
  return {2, tonumber(m[2])}
end
return {0, 0}
