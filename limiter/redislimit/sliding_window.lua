-- sliding_window.lua: exact sliding-log limiter (SlidingWindow.AllowN).
--
-- KEYS[1]  sorted set: one member per allowed event, score = Redis TIME in µs
-- ARGV[1]  window in microseconds (integer > 0)
-- ARGV[2]  limit: events allowed in any window (integer > 0)
-- ARGV[3]  n: events requested (1 <= n <= limit, checked in Go)
--
-- Now is Redis TIME, so every app server shares one clock.
-- Returns {allowed, remaining, retry_after_us, reset_after_us}:
--   allowed        1 if the n events were recorded, 0 if refused (nothing written)
--   remaining      events still allowed in the window after this decision
--   retry_after_us 0 if allowed; else µs until enough old events leave the window
--   reset_after_us µs until the log is empty (newest event + window - now)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local window = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
local n = tonumber(ARGV[3])
local key = KEYS[1]

redis.call('ZREMRANGEBYSCORE', key, '-inf', string.format('%.0f', now - window))
local count = redis.call('ZCARD', key)

if count + n <= limit then
  local nows = string.format('%.0f', now)
  local args = {}
  for i = 1, n do
    -- members are unique: one added now is indexed by its rank + 1 (zero-padded
    -- to 7 digits, limit <= 1<<20, so equal scores sort numerically); a
    -- refund removes the highest ranks, so the next indices are free
    args[2 * i - 1] = nows
    args[2 * i] = string.format('%s:%07d', nows, count + i)
  end
  redis.call('ZADD', key, unpack(args))
  redis.call('PEXPIRE', key, math.ceil(window / 1000) + 1)
  return {1, limit - count - n, 0, window}
end

local reset = 0
local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
if newest[2] then
  reset = tonumber(newest[2]) + window - now
end
local retry = 0
local idx = count + n - limit - 1
local e = redis.call('ZRANGE', key, idx, idx, 'WITHSCORES')
if e[2] then
  retry = tonumber(e[2]) + window - now
end
if retry < 1 then retry = 1 end
local remaining = limit - count
if remaining < 0 then remaining = 0 end
return {0, remaining, retry, reset}
