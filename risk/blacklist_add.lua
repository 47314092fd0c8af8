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
-- number within the memory; ban_ms the effective ban and until_ms its end,
-- or {offence, -1, 0} when the ban is permanent.
--
-- Extend-only: the ban becomes max(existing, new). An existing longer ban
-- keeps its TTL (SET … KEEPTTL), and a ban key without a TTL (written by
-- hand or by an older version) is permanent and stays permanent: its value
-- is rewritten with until_ms = 0 and no TTL is ever put on it. Needs
-- Redis >= 6.0 (KEEPTTL).
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

-- PTTL: -2 no key, -1 key without TTL (permanent), else ms left.
local cur = redis.call('PTTL', KEYS[1])
if cur == -1 then
  redis.call('SET', KEYS[1], string.format('0|%d|%s', n, ARGV[6]), 'KEEPTTL')
  return {n, -1, 0}
end
if cur >= d then
  local untilms = now + cur
  redis.call('SET', KEYS[1], string.format('%d|%d|%s', untilms, n, ARGV[6]), 'KEEPTTL')
  return {n, cur, untilms}
end
local untilms = now + d
redis.call('SET', KEYS[1], string.format('%d|%d|%s', untilms, n, ARGV[6]), 'PX', d)
return {n, d, untilms}
