-- blacklist_add.lua: record one offence and (re)ban a subject, atomically.
--
-- KEYS[1]  ban key      <prefix>risk:{bl:<kind>:<id>}:ban
-- KEYS[2]  offence key  <prefix>risk:{bl:<kind>:<id>}:n   (same hash tag)
-- ARGV[1]  base ban, ms (first offence)
-- ARGV[2]  max ban, ms
-- ARGV[3]  escalation factor (integer >= 1)
-- ARGV[4]  offence memory, ms (how long past offences count)
-- ARGV[5]  now, unix ms (the caller's injected clock; only used to record
--          "until" for reporting, Redis TTLs enforce the ban)
-- ARGV[6]  reason code
-- ARGV[7]  fixed ban, ms (0 = escalate from ARGV[1..3])
--
-- Returns {offence, ban_ms, until_ms}: offence is this subject's offence
-- number within the memory, ban_ms the effective ban (an existing longer ban
-- is never shortened).
local base = tonumber(ARGV[1])
local max = tonumber(ARGV[2])
local factor = tonumber(ARGV[3])
local memory = tonumber(ARGV[4])
local now = tonumber(ARGV[5])
local fixed = tonumber(ARGV[7])

local n = redis.call('INCR', KEYS[2])
redis.call('PEXPIRE', KEYS[2], memory)

local d = fixed
if d <= 0 then
  d = base
  local i = 1
  while i < n and d < max do
    d = d * factor
    i = i + 1
  end
  if d > max then d = max end
end

local cur = redis.call('PTTL', KEYS[1])
if cur > d then d = cur end

local untilms = now + d
redis.call('SET', KEYS[1], string.format('%d|%d|%s', untilms, n, ARGV[6]), 'PX', d)
return {n, d, untilms}
