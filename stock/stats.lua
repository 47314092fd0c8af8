-- stats.lua: read-only (run with EVALSHA_RO); a snapshot of one activity.
--
-- KEYS[1] meta    hash  stock, total, limit, start, end, exp   <prefix>{a:<id>}:meta
-- KEYS[2] buyers  hash  user -> held qty                       <prefix>{a:<id>}:buyers
-- KEYS[3] ledger  hash  requestID -> reservation record        <prefix>{a:<id>}:resv
--
-- Returns {loaded, stock, total, limit, start, end, exp, buyers, ledger}
--   (loaded 0 and zeros when the activity is not loaded; buyers and ledger are
--   HLEN counts, the ledger count includes released entries and tombstones).

local m = redis.call('HMGET', KEYS[1], 'stock', 'total', 'limit', 'start', 'end', 'exp')
if not m[1] then
  return {0, 0, 0, 0, 0, 0, 0, 0, 0}
end
return {1, tonumber(m[1]), tonumber(m[2]), tonumber(m[3]), tonumber(m[4]), tonumber(m[5]),
  tonumber(m[6]), redis.call('HLEN', KEYS[2]), redis.call('HLEN', KEYS[3])}
