-- stats.lua: read-only counters of an activity's pool.
-- KEYS[1] free  KEYS[2] state  KEYS[3] owner  KEYS[4] exp  KEYS[5] meta
-- ARGV[1] now (ms; 0 = Redis TIME)
-- Returns: {issued (-1 when never issued), free, bound (incl. expired),
--           expired (bound, deadline passed, not yet reclaimed), used}
-- Time: now_ms(ARGV[1]).
local now = now_ms(ARGV[1])
local issued = redis.call('HGET', KEYS[5], 'issued')
if not issued then issued = -1 end
return {tonumber(issued), redis.call('LLEN', KEYS[1]), redis.call('ZCARD', KEYS[4]),
  redis.call('ZCOUNT', KEYS[4], '-inf', now),
  tonumber(redis.call('HGET', KEYS[5], 'used') or '0')}
