-- verify.lua: check an answer once, atomically.
-- KEYS[1] challenge HASH (a: answer, u: user, n: wrong attempts)
-- ARGV[1] normalised answer  ARGV[2] caller's user  ARGV[3] attempt limit
-- Returns: {code, attempts_left}
--   code 0 solved (deleted: a challenge passes once)
--        1 not found (unknown, solved, burnt or expired)
--        2 wrong answer (attempt counted)
--        3 bound to another user (nothing counted, answer not checked)
--        4 wrong answer and limit reached (deleted)
-- Time: none (expiry is the key's TTL).
local h = redis.call('HMGET', KEYS[1], 'a', 'u')
if not h[1] then return {1, 0} end
if h[2] and h[2] ~= '' and h[2] ~= ARGV[2] then return {3, 0} end
if h[1] == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return {0, 0}
end
local left = tonumber(ARGV[3]) - redis.call('HINCRBY', KEYS[1], 'n', 1)
if left <= 0 then
  redis.call('DEL', KEYS[1])
  return {4, 0}
end
return {2, left}
