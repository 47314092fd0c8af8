-- reserve.lua: atomically reserve ARGV[3] units of one activity for one buyer.
--
-- KEYS[1] meta    hash  stock, total, limit, start, end, exp,     <prefix>{a:<id>}:meta
--                       epoch, seq, born, origin, frozen, paused, norebuy
-- KEYS[2] buyers  hash  user -> held qty                       <prefix>{a:<id>}:buyers
-- KEYS[3] ledger  hash  reservationID -> "user:qty:state:atMs[:relMs]"  <prefix>{a:<id>}:resv
--                       state R = held, X = released, T = tombstone (released before reserved)
-- KEYS[4] ever    hash  user -> units ever reserved            <prefix>{a:<id>}:ever
--                       (read and written only when norebuy is 1)
-- (further KEYS, adj and a shard's xout and xin, are not touched)
-- ARGV[1] reservationID
-- ARGV[2] user ID (1..64 bytes of [A-Za-z0-9._@+-], checked by the caller;
--         a string, never converted to a Lua number)
-- ARGV[3] qty (> 0, <= 2^53-1)
--
-- Now: Redis TIME (milliseconds), so every app server sees one clock.
--
-- Returns {code, remaining, held, atMs, replayed, limit, epoch, seq, exp, born, origin}
--   code 1 reserved, 2 sold out, 3 per-user limit reached, 4 not started,
--        5 ended, 6 not loaded (atMs is then Redis now, the rest 0),
--        7 released (the ID was reserved and released, or released before
--        it was reserved), 8 frozen (nothing written), 10 paused (an
--        operator paused the activity: nothing written),
--       -1 qty exceeds the per-user limit (invalid input, nothing written),
--       -2 the reservation ID is in the ledger with another user or qty (nothing written)
--        9 KEYS[1] is the directory of a sharded activity (remaining is the
--          number of shards, atMs Redis now, the rest 0; nothing written):
--          the caller routes the request to the buyer's shard
--   replayed 1 when the outcome comes from the ledger (same reservation ID again).
--   epoch, seq, exp, born, origin: the fence (see load.lua); seq is the value
--   after this call (a reservation increments it), 0s for meta written
--   before the fence existed.
-- Denials write nothing: only a successful reservation enters the ledger.
-- A replay answers from the ledger even while the activity is frozen or
-- paused. The checks of a new request, in order: not loaded, frozen,
-- paused, qty above the limit, window, stock, per-user cap.
-- Per-user cap: held + qty <= limit; with norebuy 1 also ever + qty <=
-- limit, where ever counts every unit the buyer reserved in this sale,
-- released or not (a reservation then sets ever to max(held, ever) + qty).

local rec = redis.call('HGET', KEYS[3], ARGV[1])
if rec then
  local u, q, s, at = string.match(rec, '^([^:]*):(%d+):(%a):(%d+)')
  local m = redis.call('HMGET', KEYS[1], 'stock', 'limit', 'epoch', 'seq', 'exp', 'born', 'origin')
  local rem = tonumber(m[1]) or 0
  local limit = tonumber(m[2]) or 0
  local e, sq, ex, b, o = tonumber(m[3]) or 0, tonumber(m[4]) or 0, tonumber(m[5]) or 0,
    tonumber(m[6]) or 0, tonumber(m[7]) or 0
  if s == 'T' then
    return {7, rem, 0, tonumber(at), 1, limit, e, sq, ex, b, o}
  end
  if u ~= ARGV[2] or q ~= ARGV[3] then
    return {-2, rem, 0, tonumber(at), 1, limit, e, sq, ex, b, o}
  end
  local held = tonumber(redis.call('HGET', KEYS[2], ARGV[2])) or 0
  if s == 'R' then
    return {1, rem, held, tonumber(at), 1, limit, e, sq, ex, b, o}
  end
  return {7, rem, held, tonumber(at), 1, limit, e, sq, ex, b, o}
end

local m = redis.call('HMGET', KEYS[1], 'stock', 'limit', 'start', 'end', 'exp', 'frozen',
  'epoch', 'seq', 'born', 'origin', 'paused', 'norebuy')
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if not m[1] then
  local shards = redis.call('HGET', KEYS[1], 'shards')
  if shards then
    return {9, tonumber(shards), 0, now, 0, 0, 0, 0, 0, 0, 0}
  end
  return {6, 0, 0, now, 0, 0, 0, 0, 0, 0, 0}
end
local stock = tonumber(m[1])
local limit = tonumber(m[2])
local exp = tonumber(m[5])
local e, sq, b, o = tonumber(m[7]) or 0, tonumber(m[8]) or 0, tonumber(m[9]) or 0, tonumber(m[10]) or 0
if m[6] == '1' then
  return {8, stock, 0, now, 0, limit, e, sq, exp, b, o}
end
if m[11] == '1' then
  return {10, stock, 0, now, 0, limit, e, sq, exp, b, o}
end
local qty = tonumber(ARGV[3])
if qty > limit then
  return {-1, stock, 0, 0, 0, limit, e, sq, exp, b, o}
end

local st = tonumber(m[3])
if st > 0 and now < st then
  return {4, stock, 0, now, 0, limit, e, sq, exp, b, o}
end
local en = tonumber(m[4])
if en > 0 and now >= en then
  return {5, stock, 0, now, 0, limit, e, sq, exp, b, o}
end
if stock < qty then
  return {2, stock, 0, now, 0, limit, e, sq, exp, b, o}
end
local held = tonumber(redis.call('HGET', KEYS[2], ARGV[2])) or 0
local norebuy = m[12] == '1'
local used = held
if norebuy then
  used = math.max(held, tonumber(redis.call('HGET', KEYS[4], ARGV[2])) or 0)
end
if used + qty > limit then
  return {3, stock, held, now, 0, limit, e, sq, exp, b, o}
end

redis.call('HINCRBY', KEYS[1], 'stock', -qty)
sq = redis.call('HINCRBY', KEYS[1], 'seq', 1)
redis.call('HINCRBY', KEYS[2], ARGV[2], qty)
redis.call('HSET', KEYS[3], ARGV[1], ARGV[2] .. ':' .. ARGV[3] .. ':R:' .. now)
if norebuy then
  redis.call('HSET', KEYS[4], ARGV[2], used + qty)
end
if exp > 0 then
  redis.call('PEXPIREAT', KEYS[2], exp)
  redis.call('PEXPIREAT', KEYS[3], exp)
  if norebuy then
    redis.call('PEXPIREAT', KEYS[4], exp)
  end
end
return {1, stock - qty, held + qty, now, 0, limit, e, sq, exp, b, o}
