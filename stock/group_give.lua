-- group_give.lua: give back the allowance a line took in a limit group,
-- exactly once, idempotent by the line's reservation ID; an ID never taken
-- gets a tombstone, so a late group_take.lua of it takes nothing.
--
-- KEYS[1] held    hash  user -> units taken                  <prefix>{g:<group>}:held
-- KEYS[2] ledger  hash  line reservation ID -> "user:qty:state:atMs[:relMs]"
-- ARGV[1] line reservation ID
-- ARGV[2] TTL of the group's keys in ms (for a tombstone in a new ledger)
--
-- Now: Redis TIME (milliseconds), for the release and tombstone times.
--
-- Returns code: 1 given back now, 2 given back (or tombstoned) before,
-- 3 unknown ID: tombstone written

local rec = redis.call('HGET', KEYS[2], ARGV[1])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if not rec then
  redis.call('HSET', KEYS[2], ARGV[1], ':0:T:' .. now)
  if redis.call('PTTL', KEYS[2]) < 0 then
    redis.call('PEXPIRE', KEYS[2], ARGV[2])
  end
  return 3
end
local u, q, s, at = string.match(rec, '^([^:]*):(%d+):(%a):(%d+)')
if s ~= 'R' then
  return 2
end
local left = redis.call('HINCRBY', KEYS[1], u, -tonumber(q))
if left <= 0 then
  redis.call('HDEL', KEYS[1], u)
end
redis.call('HSET', KEYS[2], ARGV[1], u .. ':' .. q .. ':X:' .. at .. ':' .. now)
return 1
