-- group_take.lua: take qty units of a buyer's allowance in a limit group
-- (at most ARGV[4] units per buyer over every line of the group, in all its
-- sales), idempotent by the line's reservation ID. The group has its own
-- hash tag {g:<group>}, apart from any activity.
--
-- KEYS[1] held    hash  user -> units taken                  <prefix>{g:<group>}:held
-- KEYS[2] ledger  hash  line reservation ID -> "user:qty:state:atMs[:activity]"
--                       state R taken, X given back, T tombstone (given back before taken)
-- KEYS[3] meta    hash  the group's data-loss fence: epoch, seq (writes
--                       since the epoch), born (ms), origin (1 made by a
--                       take or give, 3 by a rebuild), frozen ("1": a loss
--                       was seen; new takes refused until RebuildGroup)
-- ARGV[1] line reservation ID
-- ARGV[2] user ID (a string)
-- ARGV[3] qty (> 0, <= 2^53-1)
-- ARGV[4] the group's per-user limit (>= 1, <= 2^53-1)
-- ARGV[5] TTL of the group's keys in ms, renewed by every take
-- ARGV[6] the line's activity (an activity ID or a variant's "a/v"),
--         recorded after the time: "user:qty:R:atMs:activity", so a
--         sweep (Deductor.SweepGroup) can find the line's ledger entry
-- ARGV[7] the epoch to create when the group has no meta (> 0)
--
-- Now: Redis TIME (milliseconds), for the ledger record and the fence.
--
-- Returns {code, taken, epoch, seq, exp, born, origin}: taken is the
-- buyer's units in the group after the call; epoch..origin the fence (exp:
-- Redis now + the meta's TTL, in ms)
--   code 1 taken now, 2 taken before (idempotent: nothing written), 3 the limit would be exceeded
--   (nothing written), 7 given back before (nothing written), -2 the ID is
--   in the group's ledger with another user or qty (nothing written),
--   8 the group is frozen (nothing written)

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local m = redis.call('HMGET', KEYS[3], 'epoch', 'seq', 'born', 'origin', 'frozen')
if not m[1] then
  m = {ARGV[7], '0', tostring(now), '1', false}
  redis.call('HSET', KEYS[3], 'epoch', ARGV[7], 'seq', 0, 'born', now, 'origin', 1)
  redis.call('PEXPIRE', KEYS[3], ARGV[5])
end
local seq = tonumber(m[2]) or 0
local function reply(code, held)
  local ttl = redis.call('PTTL', KEYS[3])
  local exp = 0
  if ttl > 0 then
    exp = now + ttl
  end
  return {code, held, tonumber(m[1]), seq, exp, tonumber(m[3]) or 0, tonumber(m[4]) or 0}
end

local rec = redis.call('HGET', KEYS[2], ARGV[1])
local held = tonumber(redis.call('HGET', KEYS[1], ARGV[2])) or 0
if rec then
  local u, q, s = string.match(rec, '^([^:]*):(%d+):(%a)')
  if s == 'T' then
    return reply(7, held)
  end
  if u ~= ARGV[2] or q ~= ARGV[3] then
    return reply(-2, held)
  end
  if s == 'R' then
    return reply(2, held)
  end
  return reply(7, held)
end
if m[5] == '1' then
  return reply(8, held)
end
local qty = tonumber(ARGV[3])
if held + qty > tonumber(ARGV[4]) then
  return reply(3, held)
end
redis.call('HINCRBY', KEYS[1], ARGV[2], qty)
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2] .. ':' .. ARGV[3] .. ':R:' .. now .. ':' .. ARGV[6])
seq = redis.call('HINCRBY', KEYS[3], 'seq', 1)
redis.call('PEXPIRE', KEYS[1], ARGV[5])
redis.call('PEXPIRE', KEYS[2], ARGV[5])
redis.call('PEXPIRE', KEYS[3], ARGV[5])
return reply(1, held + qty)
