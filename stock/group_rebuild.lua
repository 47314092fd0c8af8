-- group_rebuild.lua: take again, in a limit group, the allowances of live
-- lines that the group's Redis state lost (a failover that dropped
-- acknowledged writes, the group's keys wiped). The caller reads the live
-- lines from its database, the truth. A line the group's ledger knows in
-- any state (taken, given back, tombstone) is left as it is: only an ID
-- the ledger lacks is taken, without the limit check (the database held
-- the cap when the line became an order). The last call of a rebuild
-- (ARGV[3] > 0) starts a new epoch of the group's fence (origin 3) and
-- lifts its freeze.
--
-- KEYS[1] held    hash  user -> units taken                  <prefix>{g:<group>}:held
-- KEYS[2] ledger  hash  line reservation ID -> "user:qty:state:atMs[:activity]"
-- KEYS[3] meta    hash  the group's fence (group_take.lua)
-- ARGV[1] TTL of the group's keys in ms, renewed when anything is taken
-- ARGV[2] the lines' activity (an activity ID or a variant's "a/v")
-- ARGV[3] 0, or on the rebuild's last call the new epoch (> 0)
-- ARGV[4..] triples: line reservation ID, user ID, qty (> 0)
--
-- Now: Redis TIME (milliseconds), for the ledger records and the epoch.
--
-- Returns {taken, epoch, seq, exp, born, origin}: the number of allowances
-- taken again, and the fence after the call (as group_take.lua returns it)

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local taken = 0
for i = 4, #ARGV, 3 do
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
  if redis.call('EXISTS', KEYS[3]) == 1 then
    redis.call('HINCRBY', KEYS[3], 'seq', taken)
  end
end
if ARGV[3] ~= '0' then
  redis.call('DEL', KEYS[3])
  redis.call('HSET', KEYS[3], 'epoch', ARGV[3], 'seq', 0, 'born', now, 'origin', 3)
  redis.call('PEXPIRE', KEYS[3], ARGV[1])
end
local m = redis.call('HMGET', KEYS[3], 'epoch', 'seq', 'born', 'origin')
local ttl = redis.call('PTTL', KEYS[3])
local exp = 0
if ttl > 0 then
  exp = now + ttl
end
return {taken, tonumber(m[1]) or 0, tonumber(m[2]) or 0, exp, tonumber(m[3]) or 0, tonumber(m[4]) or 0}
