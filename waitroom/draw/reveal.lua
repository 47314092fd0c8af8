-- reveal.lua: reveal the seed and fix the stock and the waitlist length.
-- KEYS[1] meta (HASH)
-- ARGV[1] seed (hex)  ARGV[2] sha256 of the seed (hex)  ARGV[3] stock
-- ARGV[4] waitlist length
-- Returns: {code, count, written}: code 1 ok (write or resume), 2 already
-- written, -1 not open, -2 the seed does not match the commitment (or
-- another seed was revealed), -3 not closed, -4 another stock or waitlist
-- was given before.
local m = KEYS[1]
if redis.call('EXISTS', m) == 0 then return {-1, 0, 0} end
if redis.call('HGET', m, 'commit') ~= ARGV[2] then return {-2, 0, 0} end
local seed = redis.call('HGET', m, 'seed')
if seed and seed ~= ARGV[1] then return {-2, 0, 0} end
if redis.call('HGET', m, 'closed') ~= '1' then return {-3, 0, 0} end
local st = redis.call('HGET', m, 'stock')
if st and (st ~= ARGV[3] or redis.call('HGET', m, 'wait') ~= ARGV[4]) then return {-4, 0, 0} end
redis.call('HSET', m, 'seed', ARGV[1], 'stock', ARGV[3], 'wait', ARGV[4])
local count = tonumber(redis.call('HGET', m, 'count') or '0')
local w = tonumber(redis.call('HGET', m, 'w') or '0')
if w >= count then
  redis.call('HSET', m, 'done', '1')
  if not redis.call('HGET', m, 'next') then redis.call('HSET', m, 'next', ARGV[3]) end
  return {2, count, w}
end
return {1, count, w}
