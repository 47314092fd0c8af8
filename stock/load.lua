-- load.lua: load one activity, set-if-absent (or reset when ARGV[6] is "1").
--
-- KEYS[1] meta    hash  stock, total, limit, start, end, exp   <prefix>{a:<id>}:meta
-- KEYS[2] buyers  hash  user -> held qty                       <prefix>{a:<id>}:buyers
-- KEYS[3] ledger  hash  requestID -> reservation record        <prefix>{a:<id>}:resv
-- ARGV[1] stock (>= 0)
-- ARGV[2] per-user limit (>= 1)
-- ARGV[3] start, unix ms (0 = open from now)
-- ARGV[4] end, unix ms (0 = no end)
-- ARGV[5] TTL in ms, counted from end (or from now when end is 0)
-- ARGV[6] "1" = reset: delete all three keys first (admin only)
--
-- Now: Redis TIME (milliseconds), for the expiry of keys when end is 0.
--
-- Returns {code, remaining}
--   code 1 loaded now, 0 already loaded (nothing changed; remaining is the
--        live stock), -1 the keys would expire at once (end + TTL is past)

if ARGV[6] ~= '1' then
  local cur = redis.call('HGET', KEYS[1], 'stock')
  if cur then
    return {0, tonumber(cur)}
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

if ARGV[6] == '1' then
  redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
end
redis.call('HSET', KEYS[1], 'stock', ARGV[1], 'total', ARGV[1], 'limit', ARGV[2],
  'start', ARGV[3], 'end', ARGV[4], 'exp', exp)
redis.call('PEXPIREAT', KEYS[1], exp)
return {1, tonumber(ARGV[1])}
