-- drop.lua: delete every key of an activity's pool.
-- KEYS[1..5] free, state, owner, exp, meta.  ARGV: none.
-- Returns: integer, keys deleted.  Time: not used.
return redis.call('DEL', unpack(KEYS))
