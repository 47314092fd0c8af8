-- vload.lua: write the variants hash of an activity with variants,
-- set-if-absent (or overwrite when ARGV[5] is "1"). Load calls it before it
-- loads the variants' ledgers (load.lua on each variant's keys), so a
-- variant is never reservable without the activity's limit.
--
-- KEYS[1] vars  hash  list, limit, exp                 <prefix>{a:<id>}:vars
-- ARGV[1] list: the variant IDs, comma-separated, in order
-- ARGV[2] per-user limit over all variants (>= 1, <= 2^53-1)
-- ARGV[3] end, unix ms (0 = no end)
-- ARGV[4] TTL in ms, counted from end (or from now when end is 0)
-- ARGV[5] "1" = reset: overwrite
--
-- Now: Redis TIME (milliseconds), for the expiry when end is 0.
--
-- Returns {code, 0}
--   code 1 written now, 0 already there (nothing changed), -1 the key would
--   expire at once (end + TTL is past)

if ARGV[5] ~= '1' and redis.call('EXISTS', KEYS[1]) == 1 then
  return {0, 0}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local en = tonumber(ARGV[3])
local exp = now + tonumber(ARGV[4])
if en > 0 then
  exp = en + tonumber(ARGV[4])
end
if exp <= now then
  return {-1, 0}
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'list', ARGV[1], 'limit', ARGV[2], 'exp', exp)
redis.call('PEXPIREAT', KEYS[1], exp)
return {1, 0}
