-- pause.lua: pause or resume admission.
-- KEYS[1] meta (HASH)
-- ARGV[1] "1" pause, "0" resume  ARGV[2] now (ms; 0 = Redis TIME)
-- Returns: 1, or -1 not configured. A resume empties the allowance and
-- restarts it at now, so a pause does not bank admissions.
-- Time: now_ms(ARGV[2]) (Redis TIME unless the caller injects a clock).
local now = now_ms(ARGV[2])
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
redis.call('HSET', KEYS[1], 'paused', ARGV[1])
if ARGV[1] == '0' then
  redis.call('HSET', KEYS[1], 'tok', '0', 'last', string.format('%d', now))
end
return 1
