-- poll.lua: a user's state and position; a waiting entry's poll time is
-- refreshed (entries that stop polling are skipped at admission).
-- KEYS[1] meta (HASH)  KEYS[2] ent (HASH)  KEYS[3] adm (ZSET user -> deadline ms)
-- ARGV[1] user  ARGV[2] now (ms; 0 = Redis TIME)
-- Returns: {state, position, deadline_ms, rate_milli}
--   state 0 not joined, 1 waiting, 2 admitted, 3 done, 4 left (abandoned,
--   or the admission lapsed)
--   position: places ahead + 1 (1 = next), 0 while unplaced in the pre-queue
--   deadline_ms: the admission deadline (state 2), else 0
--   rate_milli: the admission rate in thousandths of a user per second
-- Time: now_ms(ARGV[2]) (Redis TIME unless the caller injects a clock).
local now = now_ms(ARGV[2])
local rate = math.floor((tonumber(redis.call('HGET', KEYS[1], 'rate') or '0') or 0) * 1000)
local v = redis.call('HGET', KEYS[2], ARGV[1])
if not v then return {0, 0, 0, rate} end
local kind, place, seen = split(v)
if kind == 'a' then
  local dl = tonumber(redis.call('ZSCORE', KEYS[3], ARGV[1]))
  if dl and dl > now then return {2, 0, dl, rate} end
  return {4, 0, 0, rate}
end
if kind == 'd' then return {3, 0, 0, rate} end
if kind == 'x' then return {4, 0, 0, rate} end
local nseen = math.floor(now / 1000) - start_sec(KEYS[1])
if nseen ~= seen then redis.call('HSET', KEYS[2], ARGV[1], join(kind, place, nseen)) end
if place == 0 then return {1, 0, 0, rate} end
local head = tonumber(redis.call('HGET', KEYS[1], 'head') or '0')
return {1, place - head, 0, rate}
