-- restore.lua: undo a Consume whose downstream step failed: put a token the
-- user consumed back to bound, with a fresh binding deadline.
-- KEYS[1] free  KEYS[2] state  KEYS[3] owner  KEYS[4] exp  KEYS[5] meta
-- ARGV[1] user  ARGV[2] token  ARGV[3] binding TTL (ms)
-- ARGV[4] now (ms; 0 = Redis TIME)
-- Returns: integer 0 restored (state u:<user> -> b:<user>, deadline now + TTL,
--                    owner user -> token, meta used - 1, never below 0)
--          1 not found (unknown, free or reclaimed)
--          2 already bound to the user and live (no-op; a retry is safe)
--          3 state of another user
--          4 bound to the user but expired (the token is returned to the
--            pool by this call)
-- Time: now_ms(ARGV[4]).
local now = now_ms(ARGV[4])
local user, tok = ARGV[1], ARGV[2]
local st = redis.call('HGET', KEYS[2], tok)
if not st then return 1 end
if string.sub(st, 3) ~= user then return 3 end
if string.sub(st, 1, 2) == 'b:' then
  local dl = tonumber(redis.call('ZSCORE', KEYS[4], tok))
  if dl and dl > now then return 2 end
  reclaim_one(tok)
  return 4
end
if string.sub(st, 1, 2) ~= 'u:' then return 1 end
redis.call('HSET', KEYS[2], tok, 'b:' .. user)
redis.call('HSET', KEYS[3], user, tok)
redis.call('ZADD', KEYS[4], now + tonumber(ARGV[3]), tok)
if tonumber(redis.call('HGET', KEYS[5], 'used') or '0') > 0 then
  redis.call('HINCRBY', KEYS[5], 'used', -1)
end
return 0
