-- pending.lua: the transfers out of one shard not settled for a while (run
-- on the master, by the recovery of unfinished transfers).
--
-- KEYS[1] xout  hash  transferID -> "to:qty:epochTo:atMs"
-- ARGV[1] minimum age, ms (0: every pending transfer)
--
-- Now: Redis TIME (milliseconds).
--
-- Returns {transferID, record, transferID, record, ...}, those started at
-- least ARGV[1] ms ago.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local cut = now - tonumber(ARGV[1])
local x = redis.call('HGETALL', KEYS[1])
local out = {}
for i = 1, #x, 2 do
  local at = tonumber(string.match(x[i + 1], ':(%d+)$'))
  if not at or at <= cut then
    out[#out + 1] = x[i]
    out[#out + 1] = x[i + 1]
  end
end
return out
