-- place.lua: write one batch of the shuffled pre-queue, behind a fence.
-- KEYS[1] meta (HASH)  KEYS[2] ent (HASH)  KEYS[3] pq (LIST)
-- ARGV[1] seed (hex; the fence: only the revealed seed writes)
-- ARGV[2] offset (places already written before this batch)
-- ARGV[3..] the batch's users, in shuffled order
-- Returns: the places written after the call (meta "pqw"); -2 wrong seed;
-- -3 a gap (offset beyond what is written); -4 a user not in the pre-queue.
-- A batch whose offset is below what is written was written already (a
-- resumed or concurrent writer): it is skipped, so writing is idempotent.
local m = KEYS[1]
if redis.call('HGET', m, 'seed') ~= ARGV[1] then return -2 end
local w = tonumber(redis.call('HGET', m, 'pqw') or '0')
local off = tonumber(ARGV[2])
if off < w then return w end
if off > w then return -3 end
for i = 3, #ARGV do
  local v = redis.call('HGET', KEYS[2], ARGV[i])
  if not v then return -4 end
  local kind, place, seen = split(v)
  if kind ~= 'p' then return -4 end
  redis.call('HSET', KEYS[2], ARGV[i], join('P', off + i - 2, seen))
  redis.call('RPUSH', KEYS[3], ARGV[i])
end
w = off + #ARGV - 2
redis.call('HSET', m, 'pqw', w)
if w >= tonumber(redis.call('HGET', m, 'pcount') or '0') then redis.call('HSET', m, 'pqdone', '1') end
return w
