-- scan.lua: read-only (run with EVALSHA_RO); one HSCAN page of the reservation ledger.
--
-- KEYS[1] ledger  hash  requestID -> "user:qty:state:atMs[:relMs]"  <prefix>{a:<id>}:resv
-- ARGV[1] cursor ("0" to start)
-- ARGV[2] COUNT hint (> 0)
--
-- Returns {nextCursor, {requestID, record, requestID, record, ...}}
--   nextCursor is "0" when the scan is complete.

return redis.call('HSCAN', KEYS[1], ARGV[1], 'COUNT', ARGV[2])
