-- take.lua: take a token from the pool and bind it to a user, atomically.
-- KEYS[1] free (LIST)  KEYS[2] state (HASH token -> "b:<user>" | "u:<user>")
-- KEYS[3] owner (HASH user -> token)  KEYS[4] exp (ZSET token -> deadline ms)
-- KEYS[5] meta (HASH issued, used)
-- ARGV[1] user  ARGV[2] binding TTL (ms)  ARGV[3] now (ms; 0 = Redis TIME)
-- ARGV[4] lazy reclaim batch (expired bindings returned to the pool first)
-- Returns: {status, token, deadline_ms, free_left}
--   status 0 granted (new binding)   1 empty (no free token)
--          2 held (the user's live binding, same token back)
--          3 used (the user already consumed a token)   4 not issued
-- Time: now_ms(ARGV[3]) (Redis TIME unless the caller injects a clock).
local now = now_ms(ARGV[3])
local user = ARGV[1]
if redis.call('HEXISTS', KEYS[5], 'issued') == 0 then
  return {4, '', 0, 0}
end
local held = redis.call('HGET', KEYS[3], user)
if held then
  local st = redis.call('HGET', KEYS[2], held)
  if st == 'u:' .. user then
    return {3, held, 0, redis.call('LLEN', KEYS[1])}
  end
  local dl = tonumber(redis.call('ZSCORE', KEYS[4], held))
  if st == 'b:' .. user and dl and dl > now then
    return {2, held, dl, redis.call('LLEN', KEYS[1])}
  end
  reclaim_one(held)
  redis.call('HDEL', KEYS[3], user)
end
reclaim_expired(now, tonumber(ARGV[4]))
local tok = redis.call('LPOP', KEYS[1])
if not tok then
  return {1, '', 0, 0}
end
local deadline = now + tonumber(ARGV[2])
redis.call('HSET', KEYS[2], tok, 'b:' .. user)
redis.call('HSET', KEYS[3], user, tok)
redis.call('ZADD', KEYS[4], deadline, tok)
return {0, tok, deadline, redis.call('LLEN', KEYS[1])}
