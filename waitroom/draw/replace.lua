-- replace.lua: an unpaid winner is replaced by the next of the waitlist,
-- in draw order (idempotent: a second call returns the same replacement).
-- KEYS[1] meta (HASH)  KEYS[2] ent (HASH)  KEYS[3] ord (LIST)
-- ARGV[1] user
-- Returns: {code, replacement}: code 1 replaced (replacement "" when the
-- waitlist is exhausted), -1 not drawn yet, -2 not entered, -3 not a
-- winner.
local m = KEYS[1]
if redis.call('HGET', m, 'done') ~= '1' then return {-1, ''} end
local v = redis.call('HGET', KEYS[2], ARGV[1])
if not v then return {-2, ''} end
local c = string.sub(v, 1, 1)
if c == 'x' then
  local colon = string.find(v, ':', 1, true)
  return {1, string.sub(v, colon + 1)}
end
if c ~= 'w' then return {-3, ''} end
local nxt = tonumber(redis.call('HGET', m, 'next'))
local limit = math.min(tonumber(redis.call('HGET', m, 'count')),
  tonumber(redis.call('HGET', m, 'stock')) + tonumber(redis.call('HGET', m, 'wait')))
local repl = ''
while nxt < limit do
  local u = redis.call('LINDEX', KEYS[3], nxt)
  nxt = nxt + 1
  local uv = redis.call('HGET', KEYS[2], u)
  if uv and string.sub(uv, 1, 1) == 'l' then
    redis.call('HSET', KEYS[2], u, 'w' .. string.sub(uv, 2))
    repl = u
    break
  end
end
redis.call('HSET', m, 'next', string.format('%d', nxt))
redis.call('HSET', KEYS[2], ARGV[1], 'x' .. string.sub(v, 2) .. ':' .. repl)
return {1, repl}
