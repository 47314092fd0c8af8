-- stats.lua: read-only (run with EVALSHA_RO); a snapshot of one activity.
--
-- KEYS[1] meta    hash  stock, total, limit, start, end, exp,     <prefix>{a:<id>}:meta
--                       epoch, seq, born, origin, frozen
-- KEYS[2] buyers  hash  user -> held qty                       <prefix>{a:<id>}:buyers
-- KEYS[3] ledger  hash  requestID -> reservation record        <prefix>{a:<id>}:resv
--
-- Returns {loaded, stock, total, limit, start, end, exp, buyers, ledger,
--          frozen, epoch, seq}
--   (loaded 0 and zeros when the activity is not loaded; buyers and ledger are
--   HLEN counts, the ledger count includes released entries and tombstones;
--   frozen 1 when frozen; epoch and seq 0 for meta written before the fence).

local m = redis.call('HMGET', KEYS[1], 'stock', 'total', 'limit', 'start', 'end', 'exp',
  'frozen', 'epoch', 'seq')
if not m[1] then
  return {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
end
local frozen = 0
if m[7] == '1' then
  frozen = 1
end
return {1, tonumber(m[1]), tonumber(m[2]), tonumber(m[3]), tonumber(m[4]), tonumber(m[5]),
  tonumber(m[6]), redis.call('HLEN', KEYS[2]), redis.call('HLEN', KEYS[3]), frozen,
  tonumber(m[8]) or 0, tonumber(m[9]) or 0}
