-- release.lua: give back the units of one reservation, exactly once.
--
-- KEYS[1] meta    hash  stock, total, limit, start, end, exp,     <prefix>{a:<id>}:meta
--                       epoch, seq, born, origin, frozen          (or a shard's)
-- KEYS[2] buyers  hash  user -> held qty                       <prefix>{a:<id>}:buyers
-- KEYS[3] ledger  hash  reservationID -> "user:qty:state:atMs[:relMs]"  <prefix>{a:<id>}:resv
-- ARGV[1] reservationID
-- ARGV[2] pub/sub channel announcing returned stock (not a key)
-- ARGV[3] activity ID (the message published on ARGV[2])
-- ARGV[4] "1" = probe: an unknown reservation ID is answered 5 and no tombstone
--         is written (a sharded activity asks every shard this way first,
--         because the Release does not know the buyer, and so the shard)
--
-- Now: Redis TIME (milliseconds), recorded as the release time.
--
-- Returns {code, remaining, qty, user, epoch, seq, exp, born, origin, now}
--   code 1 released now (stock and the buyer's held qty given back, ledger
--          entry moved to state X, message published on ARGV[2])
--        2 already released earlier, or tombstoned (nothing changed)
--        3 unknown reservation ID: a tombstone (state T) is written so that a
--          Reserve with this ID arriving later deducts nothing
--        4 activity not loaded (nothing changed)
--        5 unknown reservation ID in probe mode (nothing changed)
--        6 KEYS[1] is the directory of a sharded activity; remaining is the
--          number of shards (nothing changed)
--   user is the buyer's ID as a string ("" when unknown).
--   epoch, seq, exp, born, origin: the fence (see load.lua); a release and a
--   tombstone increment seq. now is Redis now.
-- Release works the same whether or not the activity is frozen.

local rec = redis.call('HGET', KEYS[3], ARGV[1])
local m = redis.call('HMGET', KEYS[1], 'stock', 'exp', 'epoch', 'seq', 'born', 'origin')
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local exp = tonumber(m[2]) or 0
local e, sq, b, o = tonumber(m[3]) or 0, tonumber(m[4]) or 0, tonumber(m[5]) or 0, tonumber(m[6]) or 0

if not rec then
  if not m[1] then
    local shards = redis.call('HGET', KEYS[1], 'shards')
    if shards then
      return {6, tonumber(shards), 0, '', 0, 0, 0, 0, 0, now}
    end
    return {4, 0, 0, '', 0, 0, 0, 0, 0, now}
  end
  if ARGV[4] == '1' then
    return {5, tonumber(m[1]), 0, '', e, sq, exp, b, o, now}
  end
  redis.call('HSET', KEYS[3], ARGV[1], ':0:T:' .. now)
  sq = redis.call('HINCRBY', KEYS[1], 'seq', 1)
  if exp > 0 then
    redis.call('PEXPIREAT', KEYS[3], exp)
  end
  return {3, tonumber(m[1]), 0, '', e, sq, exp, b, o, now}
end

local u, q, s, at = string.match(rec, '^([^:]*):(%d+):(%a):(%d+)')
if s ~= 'R' then
  return {2, tonumber(m[1]) or 0, tonumber(q) or 0, u or '', e, sq, exp, b, o, now}
end
if not m[1] then
  return {4, 0, tonumber(q), u, 0, 0, 0, 0, 0, now}
end
local qty = tonumber(q)
local rem = redis.call('HINCRBY', KEYS[1], 'stock', qty)
sq = redis.call('HINCRBY', KEYS[1], 'seq', 1)
if redis.call('HINCRBY', KEYS[2], u, -qty) <= 0 then
  redis.call('HDEL', KEYS[2], u)
end
redis.call('HSET', KEYS[3], ARGV[1], u .. ':' .. q .. ':X:' .. at .. ':' .. now)
redis.call('PUBLISH', ARGV[2], ARGV[3])
return {1, rem, qty, u, e, sq, exp, b, o, now}
