-- stats.lua: the room's figures for the operator.
-- KEYS[1] meta (HASH)  KEYS[2] pq (LIST)  KEYS[3] q (LIST)  KEYS[4] adm (ZSET)
-- ARGV[1] now (ms; 0 = Redis TIME)
-- Returns: {configured, waiting, pre-queue, admitted, active, abandoned,
-- rate_milli, cap, paused, placed}
--   waiting: entries not yet admitted or skipped (pre-queue included)
--   placed: 1 once the pre-queue is shuffled and written
-- Time: now_ms(ARGV[1]) (Redis TIME unless the caller injects a clock).
local now = now_ms(ARGV[1])
local m = KEYS[1]
if redis.call('EXISTS', m) == 0 then return {0, 0, 0, 0, 0, 0, 0, 0, 0, 0} end
local function num(f) return tonumber(redis.call('HGET', m, f) or '0') or 0 end
local pcount = num('pcount')
local waiting = redis.call('LLEN', KEYS[2]) + redis.call('LLEN', KEYS[3])
local placed = 0
if pcount == 0 or redis.call('HGET', m, 'pqdone') == '1' then placed = 1 end
if placed == 0 then waiting = waiting + pcount - num('pqw') end
return {1, waiting, pcount, num('admitted'), redis.call('ZCOUNT', KEYS[4], '(' .. string.format('%d', now), '+inf'),
  num('abandoned'), math.floor(num('rate') * 1000), num('cap'), num('paused'), placed}
