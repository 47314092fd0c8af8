-- issue.lua: raise the number of tokens ever issued for an activity to a
-- target, never beyond it (idempotent; concurrent callers cannot overshoot).
-- KEYS[1] free  (LIST)   KEYS[2] state  KEYS[3] owner  KEYS[4] exp
-- KEYS[5] meta  (HASH: issued, used)
-- ARGV[1] target total (integer >= 0)
-- ARGV[2..n] fresh random tokens to add (may be fewer than needed; the
--            caller calls again with more until the target is reached)
-- Returns: integer, the total issued after the call.
-- Time: not used.
local target = tonumber(ARGV[1])
local issued = tonumber(redis.call('HGET', KEYS[5], 'issued') or '0')
if issued >= target then
  redis.call('HSETNX', KEYS[5], 'issued', issued)
  return issued
end
local n = math.min(#ARGV - 1, target - issued)
for i = 2, n + 1 do
  redis.call('RPUSH', KEYS[1], ARGV[i])
end
return redis.call('HINCRBY', KEYS[5], 'issued', n)
