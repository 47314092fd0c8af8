-- group_give.lua: give back the allowance a line took in a limit group,
-- exactly once, idempotent by the line's reservation ID; an ID never taken
-- gets a tombstone, so a late group_take.lua of it takes nothing.
--
-- KEYS[1] held    hash  user -> units taken                  <prefix>{g:<group>}:held
-- KEYS[2] ledger  hash  line reservation ID -> "user:qty:state:atMs[:relMs]"
-- KEYS[3] meta    hash  the group's fence (group_take.lua); a give-back
--                       is allowed while frozen
-- ARGV[1] line reservation ID
-- ARGV[2] TTL of the group's keys in ms (for a tombstone in a new ledger)
-- ARGV[3] the epoch to create when the group has no meta (> 0)
--
-- Now: Redis TIME (milliseconds), for the release and tombstone times.
--
-- Returns {code, epoch, seq, exp, born, origin}: code 1 given back now,
-- 2 given back (or tombstoned) before, 3 unknown ID: tombstone written;
-- the fence as group_take.lua returns it

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local m = redis.call('HMGET', KEYS[3], 'epoch', 'seq', 'born', 'origin')
if not m[1] then
  m = {ARGV[3], '0', tostring(now), '1'}
  redis.call('HSET', KEYS[3], 'epoch', ARGV[3], 'seq', 0, 'born', now, 'origin', 1)
  redis.call('PEXPIRE', KEYS[3], ARGV[2])
end
local seq = tonumber(m[2]) or 0
local function reply(code)
  local ttl = redis.call('PTTL', KEYS[3])
  local exp = 0
  if ttl > 0 then
    exp = now + ttl
  end
  return {code, tonumber(m[1]), seq, exp, tonumber(m[3]) or 0, tonumber(m[4]) or 0}
end

local rec = redis.call('HGET', KEYS[2], ARGV[1])
if not rec then
  redis.call('HSET', KEYS[2], ARGV[1], ':0:T:' .. now)
  if redis.call('PTTL', KEYS[2]) < 0 then
    redis.call('PEXPIRE', KEYS[2], ARGV[2])
  end
  seq = redis.call('HINCRBY', KEYS[3], 'seq', 1)
  return reply(3)
end
local u, q, s, at = string.match(rec, '^([^:]*):(%d+):(%a):(%d+)')
if s ~= 'R' then
  return reply(2)
end
local left = redis.call('HINCRBY', KEYS[1], u, -tonumber(q))
if left <= 0 then
  redis.call('HDEL', KEYS[1], u)
end
redis.call('HSET', KEYS[2], ARGV[1], u .. ':' .. q .. ':X:' .. at .. ':' .. now)
seq = redis.call('HINCRBY', KEYS[3], 'seq', 1)
return reply(1)
