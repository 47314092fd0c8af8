-- group_take.lua: take qty units of a buyer's allowance in a limit group
-- (at most ARGV[4] units per buyer over every line of the group, in all its
-- sales), idempotent by the line's reservation ID. The group has its own
-- hash tag {g:<group>}, apart from any activity.
--
-- KEYS[1] held    hash  user -> units taken                  <prefix>{g:<group>}:held
-- KEYS[2] ledger  hash  line reservation ID -> "user:qty:state:atMs[:activity]"
--                       state R taken, X given back, T tombstone (given back before taken)
-- ARGV[1] line reservation ID
-- ARGV[2] user ID (a string)
-- ARGV[3] qty (> 0, <= 2^53-1)
-- ARGV[4] the group's per-user limit (>= 1, <= 2^53-1)
-- ARGV[5] TTL of the group's keys in ms, renewed by every take
-- ARGV[6] the line's activity (an activity ID or a variant's "a/v"),
--         recorded after the time: "user:qty:R:atMs:activity", so a
--         sweep (Deductor.SweepGroup) can find the line's ledger entry
--
-- Now: Redis TIME (milliseconds), for the ledger record.
--
-- Returns {code, taken}: taken is the buyer's units in the group after the call
--   code 1 taken (now or before: idempotent), 3 the limit would be exceeded
--   (nothing written), 7 given back before (nothing written), -2 the ID is
--   in the group's ledger with another user or qty (nothing written)

local rec = redis.call('HGET', KEYS[2], ARGV[1])
local held = tonumber(redis.call('HGET', KEYS[1], ARGV[2])) or 0
if rec then
  local u, q, s = string.match(rec, '^([^:]*):(%d+):(%a)')
  if s == 'T' then
    return {7, held}
  end
  if u ~= ARGV[2] or q ~= ARGV[3] then
    return {-2, held}
  end
  if s == 'R' then
    return {1, held}
  end
  return {7, held}
end
local qty = tonumber(ARGV[3])
if held + qty > tonumber(ARGV[4]) then
  return {3, held}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HINCRBY', KEYS[1], ARGV[2], qty)
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2] .. ':' .. ARGV[3] .. ':R:' .. now .. ':' .. ARGV[6])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
redis.call('PEXPIRE', KEYS[2], ARGV[5])
return {1, held + qty}
