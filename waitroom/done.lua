-- done.lua: an admitted user is done; the slot is freed.
-- KEYS[1] ent (HASH)  KEYS[2] adm (ZSET)
-- ARGV[1] user
-- Returns: 1 freed now; 0 already done (or the admission had lapsed: marked
-- done); -1 never admitted.
local v = redis.call('HGET', KEYS[1], ARGV[1])
if v == 'd' then return 0 end
if v ~= 'a' then return -1 end
redis.call('HSET', KEYS[1], ARGV[1], 'd')
return redis.call('ZREM', KEYS[2], ARGV[1])
