-- extend.lua: extend a held reservation once, for its buyer: its ledger
-- record's time (ReservedAt, from which the hold's expiry is counted) moves
-- forward by ARGV[3] ms. The first ReservedAt is kept in KEYS[3]; a second
-- extension is refused.
--
-- KEYS[1] meta    hash  (exp is read)                      <prefix>{a:<id>}:meta
-- KEYS[2] ledger  hash  reservationID -> "user:qty:state:atMs[:relMs]"
-- KEYS[3] ext     hash  reservationID -> atMs before its extension
-- ARGV[1] reservation ID
-- ARGV[2] user ID
-- ARGV[3] extension in ms (> 0)
--
-- Returns {code, atMs}
--   code 1 extended now (atMs is the new time), 2 extended before (nothing
--   written; atMs is the extended time), 3 not held (absent, released or a
--   tombstone: nothing written, atMs 0), -2 held by another user (nothing
--   written, atMs 0)

local rec = redis.call('HGET', KEYS[2], ARGV[1])
if not rec then
  return {3, 0}
end
local u, q, s, at = string.match(rec, '^([^:]*):(%d+):(%a):(%d+)')
if s ~= 'R' then
  return {3, 0}
end
if u ~= ARGV[2] then
  return {-2, 0}
end
if redis.call('HEXISTS', KEYS[3], ARGV[1]) == 1 then
  return {2, tonumber(at)}
end
local nat = tonumber(at) + tonumber(ARGV[3])
redis.call('HSET', KEYS[3], ARGV[1], at)
redis.call('HSET', KEYS[2], ARGV[1], u .. ':' .. q .. ':R:' .. nat)
local exp = tonumber(redis.call('HGET', KEYS[1], 'exp')) or 0
if exp > 0 then
  redis.call('PEXPIREAT', KEYS[3], exp)
end
return {1, nat}
