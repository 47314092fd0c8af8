-- reveal.lua: the seed is revealed at the start; the pre-queue is frozen.
-- KEYS[1] meta (HASH)
-- ARGV[1] seed (hex)  ARGV[2] sha256 of the seed (hex)  ARGV[3] now (ms;
-- 0 = Redis TIME)
-- Returns: {code, pcount, written}
--   code 1 ok (placing may proceed or resume), 2 already placed,
--   -1 not configured, -2 the seed does not match the commitment (or
--   another seed was revealed), -3 before the start
-- Time: now_ms(ARGV[3]) (Redis TIME unless the caller injects a clock).
local now = now_ms(ARGV[3])
local m = KEYS[1]
if redis.call('EXISTS', m) == 0 then return {-1, 0, 0} end
if redis.call('HGET', m, 'commit') ~= ARGV[2] then return {-2, 0, 0} end
local seed = redis.call('HGET', m, 'seed')
if seed and seed ~= ARGV[1] then return {-2, 0, 0} end
if not started(m, now) then return {-3, 0, 0} end
redis.call('HSET', m, 'seed', ARGV[1])
local pcount = tonumber(redis.call('HGET', m, 'pcount') or '0')
local w = tonumber(redis.call('HGET', m, 'pqw') or '0')
if w >= pcount then
  redis.call('HSET', m, 'pqdone', '1')
  return {2, pcount, w}
end
return {1, pcount, w}
