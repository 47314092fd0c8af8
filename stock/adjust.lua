-- adjust.lua: add units to (top-up) or withdraw unreserved units from one
-- activity, or one shard of a sharded activity, as an entry of its
-- adjustment log; idempotent by adjustment ID. Never a blind overwrite:
-- stock and total move by the same delta in one atomic step.
--
-- KEYS[1] meta  hash  stock, total, frozen, exp, the fence  <prefix>{a:<id>}:meta
-- KEYS[2] adj   hash  adjustmentID -> "delta:atMs:stockAfter:totalAfter:requested"
--                                                          <prefix>{a:<id>}:adj
-- ARGV[1] adjustment ID (1..128 bytes; for a shard the caller's ID + "#" +
--         the shard index)
-- ARGV[2] delta: units to add (> 0) or withdraw (< 0); |delta| <= 2^53-1
-- ARGV[3] requested: the delta of the whole Adjust call (a shard's part
--         differs from it); an entry whose requested differs is a conflict
-- ARGV[4] mode: "exact" (all of delta or nothing), "upto" (withdraw
--         min(stock, -delta), possibly 0, and record what was taken), "peek"
--         (write nothing: answer the entry, or code 3 and the stock)
-- ARGV[5] pub/sub channel announcing returned stock (not a key)
-- ARGV[6] activity ID (the message published on ARGV[5] after a top-up)
--
-- Now: Redis TIME (milliseconds), recorded with the entry.
--
-- Returns {code, delta, stockBefore, totalBefore, stockAfter, totalAfter,
--          replayed, atMs, epoch, seq, exp, born, origin}
--   code 1 applied now (replayed 0: stock += delta, total += delta, seq + 1,
--          the entry written, a top-up published on ARGV[5]) or before
--          (replayed 1: the entry's outcome, nothing written; stockBefore
--          and totalBefore are then the entry's after minus its delta)
--        2 a withdrawal larger than the stock in "exact" mode (nothing
--          written; before = after = now)
--        3 "peek" and no entry (nothing written; before = after = now)
--        6 not loaded, 8 frozen (nothing written)
--        9 KEYS[1] is the directory of a sharded activity (delta is the
--          number of shards; nothing written)
--       -2 the ID is in the log with another requested delta (nothing written)
--       -3 stock or total would exceed 2^53-1 (nothing written)
--   delta is the units applied (negative for a withdrawal).
--   epoch .. origin: the fence (see load.lua); seq is the value after this
--   call. An adjustment is a write like a reservation: a Redis rollback that
--   loses it shows as a lower seq to every Deductor that saw it.
-- A paused activity is adjusted as usual (pause, top up, resume).

local m = redis.call('HMGET', KEYS[1], 'stock', 'total', 'frozen', 'exp', 'epoch', 'seq', 'born', 'origin')
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if not m[1] then
  local shards = redis.call('HGET', KEYS[1], 'shards')
  if shards then
    return {9, tonumber(shards), 0, 0, 0, 0, 0, now, 0, 0, 0, 0, 0}
  end
  return {6, 0, 0, 0, 0, 0, 0, now, 0, 0, 0, 0, 0}
end
local stock, total = tonumber(m[1]), tonumber(m[2]) or 0
local exp = tonumber(m[4]) or 0
local e, sq, b, o = tonumber(m[5]) or 0, tonumber(m[6]) or 0, tonumber(m[7]) or 0, tonumber(m[8]) or 0

local rec = redis.call('HGET', KEYS[2], ARGV[1])
if rec then
  local d, at, sa, ta, rq = string.match(rec, '^(-?%d+):(%d+):(-?%d+):(-?%d+):(-?%d+)$')
  if rq ~= ARGV[3] then
    return {-2, 0, stock, total, stock, total, 1, tonumber(at) or 0, e, sq, exp, b, o}
  end
  d, sa, ta = tonumber(d), tonumber(sa), tonumber(ta)
  return {1, d, sa - d, ta - d, sa, ta, 1, tonumber(at), e, sq, exp, b, o}
end
if ARGV[4] == 'peek' then
  return {3, 0, stock, total, stock, total, 0, now, e, sq, exp, b, o}
end
if m[3] == '1' then
  return {8, 0, stock, total, stock, total, 0, now, e, sq, exp, b, o}
end

local delta = tonumber(ARGV[2])
if delta < 0 and stock + delta < 0 then
  if ARGV[4] ~= 'upto' then
    return {2, 0, stock, total, stock, total, 0, now, e, sq, exp, b, o}
  end
  delta = 0
  if stock > 0 then
    delta = 0 - stock
  end
end
local max = 9007199254740991
if stock + delta > max or total + delta > max then
  return {-3, 0, stock, total, stock, total, 0, now, e, sq, exp, b, o}
end
local sa = redis.call('HINCRBY', KEYS[1], 'stock', delta)
local ta = redis.call('HINCRBY', KEYS[1], 'total', delta)
sq = redis.call('HINCRBY', KEYS[1], 'seq', 1)
redis.call('HSET', KEYS[2], ARGV[1], delta .. ':' .. now .. ':' .. sa .. ':' .. ta .. ':' .. ARGV[3])
if exp > 0 then
  redis.call('PEXPIREAT', KEYS[2], exp)
end
if delta > 0 then
  redis.call('PUBLISH', ARGV[5], ARGV[6])
end
return {1, delta, stock, total, sa, ta, 0, now, e, sq, exp, b, o}
