-- settle.lua: step 3 of a transfer, on the donor shard, once the recipient
-- decided it (credit.lua): forget the pending record, and if the transfer
-- was void give the units back. Idempotent: a record already settled is
-- not found again.
--
-- KEYS[1] meta  hash  stock, out, the fence                (the donor's)
-- KEYS[2] xout  hash  transferID -> "to:qty:epochTo:atMs"  (the donor's)
-- ARGV[1] transfer ID
-- ARGV[2] "A" applied at the recipient, "V" void there (refund)
--
-- Returns {code, stock, epoch, seq, exp, born, origin}
--   code 1 settled as applied (record deleted, seq + 1); 2 refunded (stock
--        += qty, out -= qty, record deleted, seq + 1); 0 no such pending
--        transfer (settled before; nothing changed); 4 not loaded (nothing
--        changed).

local rec = redis.call('HGET', KEYS[2], ARGV[1])
local m = redis.call('HMGET', KEYS[1], 'stock', 'epoch', 'seq', 'exp', 'born', 'origin')
local stock = tonumber(m[1]) or 0
local e, sq, exp = tonumber(m[2]) or 0, tonumber(m[3]) or 0, tonumber(m[4]) or 0
local b, o = tonumber(m[5]) or 0, tonumber(m[6]) or 0
if not m[1] then
  return {4, 0, 0, 0, 0, 0, 0}
end
if not rec then
  return {0, stock, e, sq, exp, b, o}
end
local q = tonumber(string.match(rec, '^[^:]*:(%d+):'))
redis.call('HDEL', KEYS[2], ARGV[1])
local code = 1
if ARGV[2] == 'V' then
  code = 2
  stock = redis.call('HINCRBY', KEYS[1], 'stock', q)
  redis.call('HINCRBY', KEYS[1], 'out', -q)
end
sq = redis.call('HINCRBY', KEYS[1], 'seq', 1)
return {code, stock, e, sq, exp, b, o}
