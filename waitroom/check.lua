-- check.lua: is the user admitted now (the Redis half of Verify)?
-- KEYS[1] adm (ZSET user -> deadline ms)
-- ARGV[1] user  ARGV[2] now (ms; 0 = Redis TIME)
-- Returns: the deadline (ms) when admitted and not lapsed; 0 lapsed; -1 not
-- admitted (never, or done).
-- Time: now_ms(ARGV[2]) (Redis TIME unless the caller injects a clock).
local now = now_ms(ARGV[2])
local dl = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[1]))
if not dl then return -1 end
if dl <= now then return 0 end
return dl
