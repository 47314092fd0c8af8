-- consume.lua: verify that a token is bound to the user and live, and mark
-- it used, exactly once.
-- KEYS[1] free  KEYS[2] state  KEYS[3] owner  KEYS[4] exp  KEYS[5] meta
-- ARGV[1] user  ARGV[2] token  ARGV[3] now (ms; 0 = Redis TIME)
-- Returns: integer 0 consumed   1 not found (unknown, free or reclaimed)
--          2 already used       3 bound to another user
--          4 expired (the token is returned to the pool by this call)
-- Time: now_ms(ARGV[3]).
local now = now_ms(ARGV[3])
local user, tok = ARGV[1], ARGV[2]
local st = redis.call('HGET', KEYS[2], tok)
if not st then return 1 end
if string.sub(st, 3) ~= user then return 3 end
if string.sub(st, 1, 2) == 'u:' then return 2 end
local dl = tonumber(redis.call('ZSCORE', KEYS[4], tok))
if not dl or dl <= now then
  reclaim_one(tok)
  return 4
end
redis.call('HSET', KEYS[2], tok, 'u:' .. user)
redis.call('ZREM', KEYS[4], tok)
redis.call('HINCRBY', KEYS[5], 'used', 1)
return 0
