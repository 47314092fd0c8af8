-- held.lua: read-only (run with EVALSHA_RO); what one buyer holds in one
-- activity (or in the buyer's shard of a sharded one).
--
-- KEYS[1] meta    hash  stock, ...          <prefix>{a:<id>}:meta
-- KEYS[2] buyers  hash  user -> held qty    <prefix>{a:<id>}:buyers
-- ARGV[1] user ID (a string; see reserve.lua)
--
-- Now: not read.
--
-- Returns {loaded, held}: loaded 1 when the activity is loaded, else 0;
-- held is the buyer's held quantity (0 when none). loaded 2: KEYS[1] is the
-- directory of a sharded activity, and held is the number of shards.

local m = redis.call('HMGET', KEYS[1], 'stock', 'shards')
if not m[1] then
  if m[2] then
    return {2, tonumber(m[2])}
  end
  return {0, 0}
end
return {1, tonumber(redis.call('HGET', KEYS[2], ARGV[1])) or 0}
