-- remaining.lua: read-only (run with EVALSHA_RO); the live stock of one
-- activity, or of one shard.
--
-- KEYS[1] meta  hash  stock, in, out, ...   <prefix>{a:<id>}:meta
--
-- Returns {loaded, remaining, in, out}: loaded 1 when loaded, else 0 (and
-- zeros); loaded 2: KEYS[1] is the directory of a sharded activity, and
-- remaining is the number of shards. in and out are the units a shard has
-- received from and given to other shards (0 for an un-sharded activity).

local m = redis.call('HMGET', KEYS[1], 'stock', 'in', 'out', 'shards')
if not m[1] then
  if m[4] then
    return {2, tonumber(m[4]), 0, 0}
  end
  return {0, 0, 0, 0}
end
return {1, tonumber(m[1]), tonumber(m[2]) or 0, tonumber(m[3]) or 0}
