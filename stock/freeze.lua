-- freeze.lua: set or clear the frozen flag of a loaded activity (idempotent).
--
-- KEYS[1] meta  hash  ..., frozen   <prefix>{a:<id>}:meta
-- ARGV[1] "1" = freeze, "0" = unfreeze
--
-- While frozen, reserve.lua refuses every new reservation with code 8 (a
-- replay still answers from the ledger); release.lua works as usual.
--
-- Returns 1 when the flag is now ARGV[1], 0 when the activity is not loaded
-- (nothing written).

if not redis.call('HGET', KEYS[1], 'stock') then
  return 0
end
redis.call('HSET', KEYS[1], 'frozen', ARGV[1])
return 1
