-- probe.lua: what one shard can lend (run on the master, before a borrow).
--
-- KEYS[1] meta  hash  stock, frozen, paused, epoch, seq, in, out   <prefix>{a:<id>:s<k>/<n>:<salt>}:meta
-- KEYS[2] xout  hash  transferID -> "to:qty:epochTo:atMs"  transfers out not yet settled
-- ARGV[1] grace, ms: a transfer not settled this long after it started is stale
--
-- Now: Redis TIME (milliseconds), to age the pending transfers.
--
-- Returns {loaded, stock, frozen, pending, stale, epoch, seq, in, out, paused}
--   loaded 1 when the shard is loaded (else all 0); frozen 1 when frozen,
--   paused 1 when paused (neither lends);
--   pending the transfers out of this shard not yet settled, stale those
--   of them older than the grace; in and out the units this shard has
--   received from and given to other shards.

local m = redis.call('HMGET', KEYS[1], 'stock', 'frozen', 'epoch', 'seq', 'in', 'out', 'paused')
if not m[1] then
  return {0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local cut = now - tonumber(ARGV[1])
local x = redis.call('HGETALL', KEYS[2])
local pending, stale = 0, 0
for i = 2, #x, 2 do
  pending = pending + 1
  local at = tonumber(string.match(x[i], ':(%d+)$'))
  if at and at <= cut then
    stale = stale + 1
  end
end
local frozen = 0
if m[2] == '1' then
  frozen = 1
end
return {1, tonumber(m[1]), frozen, pending, stale, tonumber(m[3]) or 0, tonumber(m[4]) or 0,
  tonumber(m[5]) or 0, tonumber(m[6]) or 0, m[7] == '1' and 1 or 0}
