-- blacklist_index.lua: the ban index of one kind (what Blacklist.List
-- reads), pruned of ended bans on every call.
--
-- KEYS[1]  until  <prefix>risk:{bl:<kind>}:until  ZSET id → ban end (unix ms
--                 of the injected clock; +inf for a permanent ban)
-- KEYS[2]  ids    <prefix>risk:{bl:<kind>}:ids    ZSET id → 0 (lexical order,
--                 for paging)
-- Both keys share one hash tag (one Cluster slot); the ban keys themselves
-- live in their subjects' slots, which is why the index is written in its
-- own step (see Blacklist.List for the order that keeps it sound).
--
-- ARGV[1]  op: "add", "del" or "list"
-- ARGV[2]  now, unix ms (the caller's injected clock): entries whose end is
--          <= now are pruned first (at most 128 per call)
-- add:  ARGV[3] id, ARGV[4] ban end (unix ms, or "+inf"); the end only
--       grows (ZADD GT), so concurrent Adds keep the longest. Returns 1.
-- del:  ARGV[3] id. Returns the number of entries removed (0 or 1).
-- list: ARGV[3] after ("" = from the start), ARGV[4] limit. Returns
--       {next, id...}: up to limit ids after `after` in lexical order, and
--       next = the last of them when more follow, else "".
local now = ARGV[2]
local ended = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, 128)
if #ended > 0 then
  redis.call('ZREM', KEYS[1], unpack(ended))
  redis.call('ZREM', KEYS[2], unpack(ended))
end

local op = ARGV[1]
if op == 'add' then
  redis.call('ZADD', KEYS[1], 'GT', ARGV[4], ARGV[3])
  redis.call('ZADD', KEYS[2], 0, ARGV[3])
  return 1
elseif op == 'del' then
  redis.call('ZREM', KEYS[1], ARGV[3])
  return redis.call('ZREM', KEYS[2], ARGV[3])
end

local limit = tonumber(ARGV[4])
local min = '-'
if ARGV[3] ~= '' then min = '(' .. ARGV[3] end
local ids = redis.call('ZRANGEBYLEX', KEYS[2], min, '+', 'LIMIT', 0, limit + 1)
local out = {''}
for i = 1, math.min(#ids, limit) do out[i + 1] = ids[i] end
if #ids > limit then out[1] = ids[limit] end
return out
