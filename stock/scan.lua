-- scan.lua: read-only (run with EVALSHA_RO); one HSCAN page of the reservation ledger.
--
-- KEYS[1] ledger  hash  reservationID -> "user:qty:state:atMs[:relMs]"  <prefix>{a:<id>}:resv
-- KEYS[2] meta    hash  of the same activity or shard               <prefix>{a:<id>}:meta
-- ARGV[1] cursor ("0" to start)
-- ARGV[2] COUNT hint (> 0)
--
-- Returns {nextCursor, {reservationID, record, reservationID, record, ...}, layout}
--   nextCursor is "0" when the scan is complete. layout: the number of
--   shards when KEYS[2] is the directory of a sharded activity (the page is
--   then empty and the cursor "0"), -1 when KEYS[2] holds no stock (not
--   loaded), else 0.

local m = redis.call('HMGET', KEYS[2], 'stock', 'shards')
local layout = 0
if not m[1] then
  if m[2] then
    return {'0', {}, tonumber(m[2])}
  end
  layout = -1
end
local r = redis.call('HSCAN', KEYS[1], ARGV[1], 'COUNT', ARGV[2])
return {r[1], r[2], layout}
