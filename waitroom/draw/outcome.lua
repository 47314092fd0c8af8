-- outcome.lua: a user's outcome.
-- KEYS[1] meta (HASH)  KEYS[2] ent (HASH)
-- ARGV[1] user
-- Returns: {code, rank, next, stock, wait}: code 0 not entered, 1 entered
-- (not drawn yet), 2 winner, 3 not a winner, 4 replaced (lost the win);
-- rank from 0 in draw order; next: the next waitlist rank to promote.
local m = KEYS[1]
local v = redis.call('HGET', KEYS[2], ARGV[1])
if not v then return {0, 0, 0, 0, 0} end
if v == 'e' then return {1, 0, 0, 0, 0} end
local c = string.sub(v, 1, 1)
local colon = string.find(v, ':', 1, true) or (#v + 1)
local rank = tonumber(string.sub(v, 2, colon - 1))
local code = 3
if c == 'w' then code = 2 elseif c == 'x' then code = 4 end
local function num(f) return tonumber(redis.call('HGET', m, f) or '0') end
return {code, rank, num('next'), num('stock'), num('wait')}
