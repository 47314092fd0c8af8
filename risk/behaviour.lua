-- behaviour.lua: record one event in a per-user sliding window log and
-- report the count.
--
-- KEYS[1]  window key  <prefix>risk:{u:<user>}:beh  (ZSET, score = ms)
-- ARGV[1]  window, ms
-- ARGV[2]  cap: at most cap+1 events are stored (cap = deny threshold),
--          bounding memory per abusive user
-- ARGV[3]  nonce, unique per call (makes members unique)
--
-- Now is Redis TIME, so every app server agrees on the window.
-- Returns {count, crossed, retry_ms}:
--   count    events in the window including this one (capped at cap+1)
--   crossed  1 when this call took the count from cap to cap+1, else 0
--   retry_ms when count > cap: ms until the oldest event leaves the window
redis.replicate_commands()
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local window = tonumber(ARGV[1])
local cap = tonumber(ARGV[2])

redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
local n = redis.call('ZCARD', KEYS[1])
local crossed = 0
if n <= cap then
  redis.call('ZADD', KEYS[1], now, string.format('%d-%s', now, ARGV[3]))
  n = n + 1
  if n == cap + 1 then crossed = 1 end
end
redis.call('PEXPIRE', KEYS[1], window)

local retry = 0
if n > cap then
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  if oldest[2] then
    retry = tonumber(oldest[2]) + window - now
    if retry < 1 then retry = 1 end
  end
end
return {n, crossed, retry}
