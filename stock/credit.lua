-- credit.lua: step 2 of a transfer, on the recipient shard: apply it
-- (credit the units) or void it, idempotently by transfer ID. This is the
-- one place that decides a transfer: once the recipient has recorded A
-- (applied) or V (void) for an ID, the other can never happen.
--
-- KEYS[1] meta  hash  stock, in, the fence                 (the recipient's)
-- KEYS[2] xin   hash  transferID -> "A|V:from:qty:atMs"    (the recipient's)
-- ARGV[1] transfer ID
-- ARGV[2] donor shard index
-- ARGV[3] qty (> 0)
-- ARGV[4] the recipient epoch recorded by give.lua: a copy of another epoch
--         (reset, rebuilt, lost and reloaded) never receives the units
-- ARGV[5] "apply" (the transfer's own step 2) or "void" (the recovery of a
--         transfer that did not finish: after this, apply is refused)
--
-- Now: Redis TIME (milliseconds), recorded with the decision.
--
-- Returns {code, stock, epoch, seq, exp, born, origin}
--   code 1 applied now (stock += qty, in += qty, seq + 1); 2 applied before
--        (nothing changed); 3 void, now (seq + 1) or before: the units were
--        never credited here; 4 stale: the recipient is not loaded or has
--        another epoch, nothing written, never credited.

local rec = redis.call('HGET', KEYS[2], ARGV[1])
local m = redis.call('HMGET', KEYS[1], 'stock', 'epoch', 'seq', 'exp', 'born', 'origin')
local stock = tonumber(m[1]) or 0
local e, sq, exp = tonumber(m[2]) or 0, tonumber(m[3]) or 0, tonumber(m[4]) or 0
local b, o = tonumber(m[5]) or 0, tonumber(m[6]) or 0
if rec then
  if string.sub(rec, 1, 1) == 'A' then
    return {2, stock, e, sq, exp, b, o}
  end
  return {3, stock, e, sq, exp, b, o}
end
if not m[1] or m[2] ~= ARGV[4] then
  return {4, stock, e, sq, exp, b, o}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local code = 3
local state = 'V'
if ARGV[5] == 'apply' then
  code, state = 1, 'A'
  stock = redis.call('HINCRBY', KEYS[1], 'stock', tonumber(ARGV[3]))
  redis.call('HINCRBY', KEYS[1], 'in', tonumber(ARGV[3]))
end
sq = redis.call('HINCRBY', KEYS[1], 'seq', 1)
redis.call('HSET', KEYS[2], ARGV[1], state .. ':' .. ARGV[2] .. ':' .. ARGV[3] .. ':' .. now)
if exp > 0 then
  redis.call('PEXPIREAT', KEYS[2], exp)
end
return {code, stock, e, sq, exp, b, o}
