-- create.lua: store a new challenge.
-- KEYS[1] challenge HASH (a: answer, u: user, n: wrong attempts)
-- ARGV[1] normalised answer  ARGV[2] bound user ("" = any)  ARGV[3] TTL ms
-- Returns: 1 created, 0 the ID already exists (caller draws a new ID).
-- Time: the key's TTL (Redis clock).
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'a', ARGV[1], 'u', ARGV[2], 'n', 0)
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
