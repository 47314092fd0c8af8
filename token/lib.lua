-- lib.lua: helpers prepended to every pool script (not a script by itself).
--
-- Time: now_ms(arg) returns arg when it is a positive number (the caller's
-- injected clock, see WithClock) and Redis TIME in milliseconds otherwise,
-- so by default all app servers share the Redis clock.
--
-- reclaim_one(tok): if tok is bound (state "b:<user>"), unbind it and push it
-- back to the tail of the free list. Returns 1 when it was returned, else 0.
-- Uses KEYS[1] free, KEYS[2] state, KEYS[3] owner, KEYS[4] exp.
local function now_ms(arg)
  local n = tonumber(arg)
  if n and n > 0 then return n end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function reclaim_one(tok)
  redis.call('ZREM', KEYS[4], tok)
  local st = redis.call('HGET', KEYS[2], tok)
  if st and string.sub(st, 1, 2) == 'b:' then
    local u = string.sub(st, 3)
    redis.call('HDEL', KEYS[2], tok)
    if redis.call('HGET', KEYS[3], u) == tok then
      redis.call('HDEL', KEYS[3], u)
    end
    redis.call('RPUSH', KEYS[1], tok)
    return 1
  end
  return 0
end

local function reclaim_expired(now, limit)
  if limit <= 0 then return 0 end
  local n = 0
  local toks = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now, 'LIMIT', 0, limit)
  for _, tok in ipairs(toks) do
    n = n + reclaim_one(tok)
  end
  return n
end

