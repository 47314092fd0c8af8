-- gcra.lua: token bucket in GCRA form (Bucket.AllowN / RefundN,
-- Priority.AllowN).
--
-- KEYS[1]  string: theoretical arrival time (tat) in µs since 2023-11-14
--          (Unix 1700000000), kept exact in a double until ~2308
-- ARGV[1]  emission interval in µs per token (decimal, > 0)
-- ARGV[2]  burst (integer > 0); for a Priority class, the bucket's burst
--          minus the class's floor, so the take succeeds only while the
--          bucket keeps floor tokens (remaining is then above the floor)
-- ARGV[3]  n: tokens to take (1 <= n <= burst), or -n to give n back
--
-- Now is Redis TIME, so every app server shares one clock.
-- Returns {allowed, remaining, retry_after_us, reset_after_us}:
--   allowed        1 if the tokens were taken (or given back), 0 if refused
--   remaining      whole tokens left after this decision
--   retry_after_us 0 if allowed; else µs until n tokens are available
--   reset_after_us µs until the bucket is full
local t = redis.call('TIME')
local now = (tonumber(t[1]) - 1700000000) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local n = tonumber(ARGV[3])
local tau = interval * burst
local key = KEYS[1]

local tat = tonumber(redis.call('GET', key) or now) or now
if tat < now then tat = now end

if n < 0 then
  local nt = tat + n * interval
  if nt < now then nt = now end
  if nt > now then
    redis.call('SET', key, string.format('%.3f', nt), 'PX', math.ceil((nt - now) / 1000) + 1)
  else
    redis.call('DEL', key)
  end
  return {1, math.floor((tau - (nt - now)) / interval), 0, math.ceil(nt - now)}
end

local nt = tat + n * interval
if nt - now > tau then
  local retry = math.ceil(nt - now - tau)
  if retry < 1 then retry = 1 end
  return {0, math.floor((tau - (tat - now)) / interval), retry, math.ceil(tat - now)}
end
redis.call('SET', key, string.format('%.3f', nt), 'PX', math.ceil((nt - now) / 1000) + 1)
return {1, math.floor((tau - (nt - now)) / interval), 0, math.ceil(nt - now)}
