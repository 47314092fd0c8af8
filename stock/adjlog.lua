-- adjlog.lua: read-only (run with EVALSHA_RO); the adjustment log of one
-- activity, or of one shard.
--
-- KEYS[1] meta  hash  <prefix>{a:<id>}:meta
-- KEYS[2] adj   hash  adjustmentID -> "delta:atMs:stockAfter:totalAfter:requested"
--
-- Returns {loaded, shards, entries}: loaded 1 and entries the HGETALL of
-- KEYS[2] (field, value, ...); loaded 2 when KEYS[1] is the directory of a
-- sharded activity (shards its number of shards, no entries); loaded 0 when
-- not loaded (no entries).

local m = redis.call('HMGET', KEYS[1], 'stock', 'shards')
if not m[1] then
  if m[2] then
    return {2, tonumber(m[2]), {}}
  end
  return {0, 0, {}}
end
return {1, 0, redis.call('HGETALL', KEYS[2])}
