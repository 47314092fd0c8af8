-- lookup.lua: read-only (run with EVALSHA_RO); the ledger record of one reservation ID.
--
-- KEYS[1] ledger  hash  reservationID -> "user:qty:state:atMs[:relMs]"  <prefix>{a:<id>}:resv
-- KEYS[2] meta    hash  of the same activity or shard               <prefix>{a:<id>}:meta
-- ARGV[1] reservationID
--
-- Returns the record string when the ID is in the ledger. Otherwise: the
-- number of shards (an integer >= 2) when KEYS[2] is the directory of a
-- sharded activity, -1 when KEYS[2] holds no stock (not loaded), -2 when
-- it is frozen (its ledger may have lost entries: an absent ID proves
-- nothing until the rebuild), nil.

local r = redis.call('HGET', KEYS[1], ARGV[1])
if r then
  return r
end
local m = redis.call('HMGET', KEYS[2], 'stock', 'shards', 'frozen')
if m[1] then
  if m[3] == '1' then
    return -2
  end
  return false
end
if m[2] then
  return tonumber(m[2])
end
return -1
