-- give.lua: step 1 of a transfer between two shards: the donor atomically
-- takes units out of its stock into a pending transfer record in its own
-- slot. Step 2 is credit.lua on the recipient, step 3 settle.lua here.
--
-- KEYS[1] meta  hash  stock, frozen, paused, exp, out, the fence (the donor's)
-- KEYS[2] xout  hash  transferID -> "to:qty:epochTo:atMs"  (the donor's)
-- ARGV[1] transfer ID (unique)
-- ARGV[2] recipient shard index
-- ARGV[3] units wanted (> 0)
-- ARGV[4] the recipient's epoch: credit.lua applies the transfer only to
--         that copy of the recipient
--
-- Lends half of the stock, rounded up, and at least the units wanted (all
-- of it when it has fewer). Refuses while frozen (its data may be lost) and
-- while paused (a paused shard lends nothing, so a pause cannot be sold
-- around through another shard).
--
-- Now: Redis TIME (milliseconds), the start of the transfer, by which the
-- recovery ages it.
--
-- Returns {code, qty, stock, epoch, seq, exp, born, origin}
--   code 1 qty units taken (stock is what is left), out += qty, seq + 1;
--        2 nothing to lend (stock 0); 6 not loaded; 8 frozen; 10 paused
--        (nothing written for 2, 6, 8 and 10). epoch .. origin: the fence (see load.lua).

local m = redis.call('HMGET', KEYS[1], 'stock', 'frozen', 'exp', 'epoch', 'seq', 'born', 'origin', 'paused')
if not m[1] then
  return {6, 0, 0, 0, 0, 0, 0, 0}
end
local stock = tonumber(m[1])
local exp = tonumber(m[3]) or 0
local e, sq, b, o = tonumber(m[4]) or 0, tonumber(m[5]) or 0, tonumber(m[6]) or 0, tonumber(m[7]) or 0
if m[2] == '1' then
  return {8, 0, stock, e, sq, exp, b, o}
end
if m[8] == '1' then
  return {10, 0, stock, e, sq, exp, b, o}
end
if stock <= 0 then
  return {2, 0, stock, e, sq, exp, b, o}
end
local q = math.ceil(stock / 2)
local want = tonumber(ARGV[3])
if q < want then
  q = want
end
if q > stock then
  q = stock
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HINCRBY', KEYS[1], 'stock', -q)
redis.call('HINCRBY', KEYS[1], 'out', q)
sq = redis.call('HINCRBY', KEYS[1], 'seq', 1)
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2] .. ':' .. q .. ':' .. ARGV[4] .. ':' .. now)
if exp > 0 then
  redis.call('PEXPIREAT', KEYS[2], exp)
end
return {1, q, stock - q, e, sq, exp, b, o}
