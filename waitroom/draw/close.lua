-- close.lua: close the entry window (idempotent).
-- KEYS[1] meta (HASH)
-- Returns: the number of entries, or -1 not open.
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
redis.call('HSET', KEYS[1], 'closed', '1')
return tonumber(redis.call('HGET', KEYS[1], 'count') or '0')
