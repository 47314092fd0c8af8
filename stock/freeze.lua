-- freeze.lua: set or clear the frozen flag of a loaded activity, or of one
-- shard (idempotent).
--
-- KEYS[1] meta  hash  ..., frozen   <prefix>{a:<id>}:meta
-- ARGV[1] "1" = freeze, "0" = unfreeze
--
-- While frozen, reserve.lua refuses every new reservation with code 8 (a
-- replay still answers from the ledger), give.lua lends nothing; release.lua
-- and the transfer steps that finish a transfer work as usual.
--
-- Returns 1 when the flag is now ARGV[1], 0 when not loaded, 2 when KEYS[1]
-- is the directory of a sharded activity (nothing written for 0 and 2).

if not redis.call('HGET', KEYS[1], 'stock') then
  if redis.call('HEXISTS', KEYS[1], 'shards') == 1 then
    return 2
  end
  return 0
end
redis.call('HSET', KEYS[1], 'frozen', ARGV[1])
return 1
