-- load.lua: load one activity, or one shard of a sharded activity,
-- set-if-absent (or reset when ARGV[6] is "1").
--
-- KEYS[1] meta    hash  stock, total, limit, start, end, exp,     <prefix>{a:<id>}:meta
--                       epoch, seq, born, origin, frozen, paused, norebuy
-- KEYS[2] buyers  hash  user -> held qty                       <prefix>{a:<id>}:buyers
-- KEYS[3] ledger  hash  reservationID -> reservation record        <prefix>{a:<id>}:resv
-- KEYS[4] ever    hash  user -> units ever reserved, deleted by a reset
-- KEYS[5] adj     hash  adjustment log, deleted by a reset
-- KEYS[6] xout    hash  (shards only) transfers out, deleted by a reset
-- KEYS[7] xin     hash  (shards only) transfers in, deleted by a reset
-- ARGV[1] stock (>= 0, <= 2^53-1): of the activity, or of this shard
-- ARGV[2] per-user limit (>= 1, <= 2^53-1)
-- ARGV[3] start, unix ms (0 = open from now)
-- ARGV[4] end, unix ms (0 = no end)
-- ARGV[5] TTL in ms, counted from end (or from now when end is 0)
-- ARGV[6] "1" = reset: delete every key above first (admin only)
-- ARGV[7] epoch: a random integer in [1, 2^52) chosen by the caller
-- ARGV[8] origin of the epoch: 1 Load, 2 Reset, 4 frozen placeholder
-- ARGV[9] "1" = write a frozen placeholder: stock 0 (total ARGV[1]) and
--         frozen 1, set-if-absent, so that Reserve answers frozen, not
--         "not loaded", until the activity is rebuilt (rebuild.lua)
-- ARGV[10] "1" = norebuy: units a buyer once reserved count against the
--         per-user limit for the whole sale, even after release
--         (reserve.lua keeps them in KEYS[4])
--
-- The fence: epoch names this copy of the activity's state; seq counts the
-- writes made to it (reserve.lua, release.lua); born is the Redis time at
-- which the epoch was created; origin says who created it; frozen 1 makes
-- reserve.lua refuse everything but replays. A Deductor that sees the epoch
-- change, the seq go back or the keys vanish before exp knows that Redis
-- lost or rolled back data.
--
-- Now: Redis TIME (milliseconds), for the expiry of keys when end is 0, and
-- for born.
--
-- Returns {code, remaining}
--   code 1 loaded now, 0 already loaded (nothing changed; remaining is the
--        live stock, 0 when KEYS[1] is the directory of a sharded
--        activity), -1 the keys would expire at once (end + TTL is past)

if ARGV[6] ~= '1' then
  local cur = redis.call('HMGET', KEYS[1], 'stock', 'shards')
  if cur[1] then
    return {0, tonumber(cur[1])}
  end
  if cur[2] then
    return {0, 0}
  end
end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local en = tonumber(ARGV[4])
local exp = now + tonumber(ARGV[5])
if en > 0 then
  exp = en + tonumber(ARGV[5])
end
if exp <= now then
  return {-1, 0}
end

local born = now
if ARGV[6] == '1' then
  local old = tonumber(redis.call('HGET', KEYS[1], 'born'))
  if old and old >= born then
    born = old + 1
  end
  redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5])
  if KEYS[7] then
    redis.call('DEL', KEYS[6], KEYS[7])
  end
end
local stock, frozen = ARGV[1], '0'
if ARGV[9] == '1' then
  stock, frozen = '0', '1'
end
redis.call('HSET', KEYS[1], 'stock', stock, 'total', ARGV[1], 'limit', ARGV[2],
  'start', ARGV[3], 'end', ARGV[4], 'exp', exp,
  'epoch', ARGV[7], 'seq', 0, 'born', born, 'origin', ARGV[8], 'frozen', frozen,
  'paused', '0', 'norebuy', ARGV[10])
redis.call('PEXPIREAT', KEYS[1], exp)
return {1, tonumber(stock)}
