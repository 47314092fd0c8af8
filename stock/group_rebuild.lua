-- group_rebuild.lua: take again, in a limit group, the allowances of live
-- lines that the group's Redis state lost (a failover that dropped
-- acknowledged writes; the group has no data-loss fence of its own). The
-- caller reads the live lines from its database, the truth. A line the
-- group's ledger knows in any state (taken, given back, tombstone) is left
-- as it is: only an ID the ledger lacks is taken, without the limit check
-- (the database held the cap when the line became an order).
--
-- KEYS[1] held    hash  user -> units taken                  <prefix>{g:<group>}:held
-- KEYS[2] ledger  hash  line reservation ID -> "user:qty:state:atMs[:activity]"
-- ARGV[1] TTL of the group's keys in ms, renewed when anything is taken
-- ARGV[2] the lines' activity (an activity ID or a variant's "a/v")
-- ARGV[3..] triples: line reservation ID, user ID, qty (> 0)
--
-- Now: Redis TIME (milliseconds), for the ledger records.
--
-- Returns the number of allowances taken again.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local taken = 0
for i = 3, #ARGV, 3 do
  local id, user, qty = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  if redis.call('HEXISTS', KEYS[2], id) == 0 then
    redis.call('HINCRBY', KEYS[1], user, tonumber(qty))
    redis.call('HSET', KEYS[2], id, user .. ':' .. qty .. ':R:' .. now .. ':' .. ARGV[2])
    taken = taken + 1
  end
end
if taken > 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  redis.call('PEXPIRE', KEYS[2], ARGV[1])
end
return taken
