-- configure.lua: set a sale's room settings.
-- KEYS[1] meta (HASH)
-- ARGV[1] start (unix ms)  ARGV[2] commitment (hex sha256 of the seed)
-- ARGV[3] rate (users per second, decimal; 0 = no rate limit)
-- ARGV[4] max active (0 = no cap)  ARGV[5] now (ms; 0 = Redis TIME)
-- Returns: 1 set; -1 the room has started and ARGV[1] or ARGV[2] differ from
-- the stored start or commitment (they are fixed once the room started).
-- Time: now_ms(ARGV[5]) (Redis TIME unless the caller injects a clock).
local now = now_ms(ARGV[5])
if redis.call('EXISTS', KEYS[1]) == 1 and started(KEYS[1], now) then
  if redis.call('HGET', KEYS[1], 'start') ~= ARGV[1] or redis.call('HGET', KEYS[1], 'commit') ~= ARGV[2] then
    return -1
  end
end
redis.call('HSET', KEYS[1], 'start', ARGV[1], 'commit', ARGV[2], 'rate', ARGV[3], 'cap', ARGV[4])
return 1
