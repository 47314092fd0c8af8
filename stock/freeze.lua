-- freeze.lua: set or clear one flag, frozen or paused, of a loaded
-- activity, or of one shard (idempotent).
--
-- KEYS[1] meta  hash  ..., frozen, paused   <prefix>{a:<id>}:meta
-- ARGV[1] "1" = set, "0" = clear
-- ARGV[2] the flag: "paused" (Pause / Resume, an operator's), anything else
--         means "frozen" (Freeze / Unfreeze, and the data-loss fence). The
--         two are independent: clearing one never clears the other.
--
-- While frozen, reserve.lua refuses every new reservation with code 8, while
-- paused with code 10 (a replay still answers from the ledger); give.lua
-- lends nothing in either case; release.lua, adjust.lua (paused only) and
-- the transfer steps that finish a transfer work as usual.
--
-- Returns 1 when the flag is now ARGV[1], 0 when not loaded, 2 when KEYS[1]
-- is the directory of a sharded activity (nothing written for 0 and 2).

if not redis.call('HGET', KEYS[1], 'stock') then
  if redis.call('HEXISTS', KEYS[1], 'shards') == 1 then
    return 2
  end
  return 0
end
local field = 'frozen'
if ARGV[2] == 'paused' then
  field = 'paused'
end
redis.call('HSET', KEYS[1], field, ARGV[1])
return 1
