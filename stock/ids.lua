-- ids.lua: read-only (run with EVALSHA_RO); one HSCAN page of the ledger's
-- reservation IDs, without the records (half the bytes of scan.lua).
--
-- KEYS[1] ledger  hash  reservationID -> "user:qty:state:atMs[:relMs]"  <prefix>{a:<id>}:resv
-- ARGV[1] cursor ("0" to start)
-- ARGV[2] COUNT hint (> 0)
--
-- Returns {nextCursor, {reservationID, reservationID, ...}}
--   nextCursor is "0" when the scan is complete.

local r = redis.call('HSCAN', KEYS[1], ARGV[1], 'COUNT', ARGV[2])
local ids = {}
for i = 1, #r[2], 2 do
  ids[#ids + 1] = r[2][i]
end
return {r[1], ids}
