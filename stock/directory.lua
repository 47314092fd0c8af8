-- directory.lua: write the directory of a sharded activity, set-if-absent
-- (or overwrite when ARGV[7] is "1"). Its shards are written first, by
-- load.lua or rebuild.lua on their own keys: a directory present means the
-- layout is complete.
--
-- KEYS[1] meta    hash  <prefix>{a:<id>}:meta: shards, total, limit, start,
--                       end, exp, epoch, born, origin, norebuy (no stock field)
-- KEYS[2] buyers  hash  <prefix>{a:<id>}:buyers (deleted on overwrite)
-- KEYS[3] ledger  hash  <prefix>{a:<id>}:resv   (deleted on overwrite)
-- KEYS[4] ever    hash  <prefix>{a:<id>}:ever   (deleted on overwrite)
-- KEYS[5] adj     hash  <prefix>{a:<id>}:adj    (deleted on overwrite)
-- ARGV[1] number of shards (2..64)
-- ARGV[2] total stock of the activity
-- ARGV[3] per-user limit
-- ARGV[4] start, unix ms (0 = open from now)
-- ARGV[5] end, unix ms (0 = no end)
-- ARGV[6] TTL in ms, counted from end (or from now when end is 0)
-- ARGV[7] "1" = overwrite (Reset, Rebuild): delete the three keys first
-- ARGV[8] epoch of the layout: a random integer in [1, 2^52)
-- ARGV[9] origin: 1 Load, 2 Reset, 3 Rebuild, 4 frozen placeholder
-- ARGV[10] "1" = norebuy (as load.lua; the shards hold it too, for
--         reserve.lua: here it is only read by stats.lua)
--
-- Now: Redis TIME (milliseconds), for expiry and born.
--
-- Returns {code, shards}
--   code 1 written (shards = ARGV[1]); 0 already there, nothing written
--        (shards = the directory's, or 1 when KEYS[1] is an un-sharded
--        activity's meta); -1 the keys would expire at once

if ARGV[7] ~= '1' then
  local cur = redis.call('HMGET', KEYS[1], 'stock', 'shards')
  if cur[1] then
    return {0, 1}
  end
  if cur[2] then
    return {0, tonumber(cur[2])}
  end
end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local en = tonumber(ARGV[5])
local exp = now + tonumber(ARGV[6])
if en > 0 then
  exp = en + tonumber(ARGV[6])
end
if exp <= now then
  return {-1, 0}
end
local born = now
if ARGV[7] == '1' then
  local old = tonumber(redis.call('HGET', KEYS[1], 'born'))
  if old and old >= born then
    born = old + 1
  end
  redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5])
end
redis.call('HSET', KEYS[1], 'shards', ARGV[1], 'total', ARGV[2], 'limit', ARGV[3],
  'start', ARGV[4], 'end', ARGV[5], 'exp', exp, 'epoch', ARGV[8], 'born', born, 'origin', ARGV[9],
  'norebuy', ARGV[10])
redis.call('PEXPIREAT', KEYS[1], exp)
return {1, tonumber(ARGV[1])}
