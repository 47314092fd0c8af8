-- enter.lua: one entry per user, while the window is open.
-- KEYS[1] meta (HASH)  KEYS[2] ent (HASH user -> entry)
-- ARGV[1] user
-- Returns: 1 new entry, 0 already entered, -1 not open, -2 closed.
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
if redis.call('HGET', KEYS[1], 'closed') == '1' then
  if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1 then return 0 end
  return -2
end
if redis.call('HSETNX', KEYS[2], ARGV[1], 'e') == 0 then return 0 end
redis.call('HINCRBY', KEYS[1], 'count', 1)
return 1
