-- lib.lua: helpers prepended to every waitroom script (not a script by itself).
--
-- Time: now_ms(arg) returns arg when it is a positive number (the caller's
-- injected clock, see WithClock) and Redis TIME in milliseconds otherwise,
-- so by default every instance shares the Redis clock.
--
-- Entry values (HASH ent, user -> value):
--   "p:<seen>"          pre-queue entry, not yet placed by the shuffle
--   "P<place>:<seen>"   pre-queue entry placed by the shuffle
--   "<place>:<seen>"    entry that joined after the start (first in, first out)
--   "a"                 admitted (its deadline is its score in ZSET adm)
--   "d"                 done (Done called)
--   "x"                 abandoned (skipped at admission: did not poll in time)
-- <seen> is the second of the last join or poll, relative to the start
-- second (meta "start" / 1000, floored), so the value stays short.
local function now_ms(arg)
  local n = tonumber(arg)
  if n and n > 0 then return n end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- split(v) -> kind, place, seen. kind is 'p' (pre-queue unplaced), 'P'
-- (pre-queue placed), 'f' (after the start), or v itself ('a', 'd', 'x').
local function split(v)
  local c = string.sub(v, 1, 1)
  if c == 'a' or c == 'd' or c == 'x' then return c, 0, 0 end
  local colon = string.find(v, ':', 1, true)
  if not colon then return '?', 0, 0 end
  local seen = tonumber(string.sub(v, colon + 1)) or 0
  if c == 'p' then return 'p', 0, seen end
  if c == 'P' then return 'P', tonumber(string.sub(v, 2, colon - 1)) or 0, seen end
  return 'f', tonumber(string.sub(v, 1, colon - 1)) or 0, seen
end

local function join(kind, place, seen)
  local s = string.format('%d', seen)
  if kind == 'p' then return 'p:' .. s end
  if kind == 'P' then return 'P' .. string.format('%d', place) .. ':' .. s end
  return string.format('%d', place) .. ':' .. s
end

local function start_sec(meta)
  return math.floor(tonumber(redis.call('HGET', meta, 'start') or '0') / 1000)
end

-- mark_started: once "now" reaches the start, the flag is set for good, so a
-- later call with a lagging clock never adds to the pre-queue.
local function started(meta, now)
  if redis.call('HGET', meta, 'started') == '1' then return true end
  local st = tonumber(redis.call('HGET', meta, 'start') or '0')
  if now >= st then
    redis.call('HSET', meta, 'started', '1')
    return true
  end
  return false
end
