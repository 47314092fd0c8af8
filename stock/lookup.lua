-- lookup.lua: read-only (run with EVALSHA_RO); the ledger record of one request ID.
--
-- KEYS[1] ledger  hash  requestID -> "user:qty:state:atMs[:relMs]"  <prefix>{a:<id>}:resv
-- ARGV[1] requestID
--
-- Returns the record string, or nil when the ID is not in the ledger.

return redis.call('HGET', KEYS[1], ARGV[1])
