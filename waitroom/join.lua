-- join.lua: one entry per user per sale; a rejoin keeps the place.
-- KEYS[1] meta (HASH)  KEYS[2] ent (HASH user -> entry)  KEYS[3] q (LIST)
-- ARGV[1] user  ARGV[2] now (ms; 0 = Redis TIME)
-- Returns: {code, place}
--   code 1 new entry, 0 existing entry (nothing changed), -1 not configured
--   place: the entry's place, 0 while it waits in the pre-queue unplaced
-- Before the start an entry goes to the pre-queue (placed by the shuffle);
-- from the start on it gets the next place, first in, first out.
-- Time: now_ms(ARGV[2]) (Redis TIME unless the caller injects a clock).
local now = now_ms(ARGV[2])
if redis.call('EXISTS', KEYS[1]) == 0 then return {-1, 0} end
local v = redis.call('HGET', KEYS[2], ARGV[1])
if v then
  local kind, place = split(v)
  return {0, place}
end
local seen = math.floor(now / 1000) - start_sec(KEYS[1])
if not started(KEYS[1], now) then
  redis.call('HSET', KEYS[2], ARGV[1], join('p', 0, seen))
  redis.call('HINCRBY', KEYS[1], 'pcount', 1)
  return {1, 0}
end
local f = redis.call('HINCRBY', KEYS[1], 'fcount', 1)
local place = tonumber(redis.call('HGET', KEYS[1], 'pcount') or '0') + f
redis.call('HSET', KEYS[2], ARGV[1], join('f', place, seen))
redis.call('RPUSH', KEYS[3], ARGV[1])
return {1, place}
