-- write.lua: write one batch of the draw order, behind a fence.
-- KEYS[1] meta (HASH)  KEYS[2] ent (HASH)  KEYS[3] ord (LIST)
-- ARGV[1] seed (hex; only the revealed seed writes)  ARGV[2] offset
-- (ranks written before this batch)  ARGV[3..] the batch's users in draw
-- order
-- Returns: the ranks written after the call; -2 wrong seed; -3 a gap; -4
-- a user who did not enter (or is ranked already).
-- Entry values after the draw: "w<rank>" winner, "l<rank>" not (yet) a
-- winner, "x<rank>:<replacement>" a winner replaced (ranks from 0).
local m = KEYS[1]
if redis.call('HGET', m, 'seed') ~= ARGV[1] then return -2 end
local w = tonumber(redis.call('HGET', m, 'w') or '0')
local off = tonumber(ARGV[2])
if off < w then return w end
if off > w then return -3 end
local stock = tonumber(redis.call('HGET', m, 'stock'))
for i = 3, #ARGV do
  if redis.call('HGET', KEYS[2], ARGV[i]) ~= 'e' then return -4 end
  local rank = off + i - 3
  local c = 'l'
  if rank < stock then c = 'w' end
  redis.call('HSET', KEYS[2], ARGV[i], c .. string.format('%d', rank))
  redis.call('RPUSH', KEYS[3], ARGV[i])
end
w = off + #ARGV - 2
redis.call('HSET', m, 'w', w)
if w >= tonumber(redis.call('HGET', m, 'count') or '0') then
  redis.call('HSET', m, 'done', '1', 'next', string.format('%d', stock))
end
return w
