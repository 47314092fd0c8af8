-- group_take.lua: take the allowances of a cart's lines in one limit group,
-- all or nothing (at most ARGV[2] units per buyer over every line of the
-- group, in all its sales), idempotent by each line's reservation ID. All
-- of a cart's lines in the group are decided at once: taken line by line,
-- two concurrent carts of one buyer could each take a first line, both be
-- refused the second and give back, and the buyer be told the cap was
-- reached while holding nothing. The group has its own hash tag
-- {g:<group>}, apart from any activity.
--
-- KEYS[1] held    hash  user -> units taken                  <prefix>{g:<group>}:held
-- KEYS[2] ledger  hash  line reservation ID -> "user:qty:state:atMs[:activity]"
--                       state R taken, X given back, T tombstone (given back before taken)
-- KEYS[3] meta    hash  the group's data-loss fence: epoch, seq (writes
--                       since the epoch), born (ms), origin (1 made by a
--                       take or give, 3 by a rebuild), frozen ("1": a loss
--                       was seen; new takes refused until RebuildGroup)
-- ARGV[1] user ID (a string)
-- ARGV[2] the group's per-user limit (>= 1, <= 2^53-1)
-- ARGV[3] TTL of the group's keys in ms, renewed by every take
-- ARGV[4] the epoch to create when the group has no meta (> 0)
-- ARGV[5], ARGV[6], ARGV[7], then the next three, ...: each line's
--         reservation ID, qty (> 0, <= 2^53-1) and activity (an activity
--         ID or a variant's "a/v", recorded after the time:
--         "user:qty:R:atMs:activity", so a sweep (Deductor.SweepGroup) can
--         find the line's ledger entry)
--
-- Now: Redis TIME (milliseconds), for the ledger record and the fence.
--
-- Returns {code, line, taken, epoch, seq, exp, born, origin, f1, ..., fn}:
-- line is the 0-based index of the line that decided a refusal (-1 when
-- none did); taken is the buyer's units in the group after the call;
-- epoch..origin the fence (exp: Redis now + the meta's TTL, in ms); fi is
-- 1 when line i was taken by this call, 2 when it was taken before (also
-- on a refusal, so the caller gives it back), 0 otherwise
--   code 1 taken now (every line not taken before), 2 every line taken
--   before (idempotent: nothing written), 3 the limit would be exceeded
--   (line: the first whose units cross it; nothing written), 7 a line was
--   given back before (nothing written), -2 a line's ID is in the group's
--   ledger with another user or qty (nothing written), 8 the group is
--   frozen (nothing written)

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local m = redis.call('HMGET', KEYS[3], 'epoch', 'seq', 'born', 'origin', 'frozen')
if not m[1] then
  m = {ARGV[4], '0', tostring(now), '1', false}
  redis.call('HSET', KEYS[3], 'epoch', ARGV[4], 'seq', 0, 'born', now, 'origin', 1)
  redis.call('PEXPIRE', KEYS[3], ARGV[3])
end
local seq = tonumber(m[2]) or 0
local n = (#ARGV - 4) / 3
local flags = {}
for i = 1, n do
  flags[i] = 0
end
local held = tonumber(redis.call('HGET', KEYS[1], ARGV[1])) or 0
local function reply(code, line, h)
  local ttl = redis.call('PTTL', KEYS[3])
  local exp = 0
  if ttl > 0 then
    exp = now + ttl
  end
  return {code, line, h, tonumber(m[1]), seq, exp, tonumber(m[3]) or 0, tonumber(m[4]) or 0, unpack(flags)}
end

local new = {}
for i = 1, n do
  local id, q = ARGV[2 + 3 * i], ARGV[3 + 3 * i]
  local rec = redis.call('HGET', KEYS[2], id)
  if rec then
    local u, rq, s = string.match(rec, '^([^:]*):(%d+):(%a)')
    if s == 'T' then
      return reply(7, i - 1, held)
    end
    if u ~= ARGV[1] or rq ~= q then
      return reply(-2, i - 1, held)
    end
    if s ~= 'R' then
      return reply(7, i - 1, held)
    end
    flags[i] = 2
  else
    new[#new + 1] = i
  end
end
if #new == 0 then
  return reply(2, -1, held)
end
if m[5] == '1' then
  return reply(8, new[1] - 1, held)
end
local sum = 0
for _, i in ipairs(new) do
  sum = sum + tonumber(ARGV[3 + 3 * i])
  if held + sum > tonumber(ARGV[2]) then
    return reply(3, i - 1, held)
  end
end
redis.call('HINCRBY', KEYS[1], ARGV[1], sum)
for _, i in ipairs(new) do
  redis.call('HSET', KEYS[2], ARGV[2 + 3 * i], ARGV[1] .. ':' .. ARGV[3 + 3 * i] .. ':R:' .. now .. ':' .. ARGV[4 + 3 * i])
  flags[i] = 1
end
seq = redis.call('HINCRBY', KEYS[3], 'seq', 1)
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
redis.call('PEXPIRE', KEYS[3], ARGV[3])
return reply(1, -1, held + sum)
