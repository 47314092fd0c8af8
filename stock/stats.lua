-- stats.lua: read-only (run with EVALSHA_RO); a snapshot of one activity,
-- or of one shard.
--
-- KEYS[1] meta    hash  stock, total, limit, start, end, exp,     <prefix>{a:<id>}:meta
--                       epoch, seq, born, origin, frozen, paused, norebuy, in, out
-- KEYS[2] buyers  hash  user -> held qty                       <prefix>{a:<id>}:buyers
-- KEYS[3] ledger  hash  reservationID -> reservation record        <prefix>{a:<id>}:resv
-- KEYS[4] ever, KEYS[5] adj: not read
-- KEYS[6] xout    hash  (shards only) transfers not yet settled
--
-- Returns {loaded, stock, total, limit, start, end, exp, buyers, ledger,
--          flags, epoch, seq, in, out, pending}
--   (loaded 0 and zeros when the activity is not loaded; buyers and ledger are
--   HLEN counts, the ledger count includes released entries and tombstones;
--   flags: 1 frozen + 2 paused + 4 norebuy; epoch and seq 0 for meta written before the fence;
--   in and out the units received from and given to other shards, pending
--   the transfers out of this shard not yet settled, 0 unless a shard).
--   loaded 2: KEYS[1] is the directory of a sharded activity; stock is then
--   the number of shards, total, limit, start, end, exp, epoch and flags
--   (norebuy only) those of the directory, the rest 0.

local m = redis.call('HMGET', KEYS[1], 'stock', 'total', 'limit', 'start', 'end', 'exp',
  'frozen', 'epoch', 'seq', 'in', 'out', 'shards', 'paused', 'norebuy')
local flags = 0
if m[7] == '1' then
  flags = flags + 1
end
if m[13] == '1' then
  flags = flags + 2
end
if m[14] == '1' then
  flags = flags + 4
end
if not m[1] then
  if m[12] then
    return {2, tonumber(m[12]), tonumber(m[2]) or 0, tonumber(m[3]) or 0, tonumber(m[4]) or 0,
      tonumber(m[5]) or 0, tonumber(m[6]) or 0, 0, 0, flags, tonumber(m[8]) or 0, 0, 0, 0, 0}
  end
  return {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
end
local pending = 0
if KEYS[6] then
  pending = redis.call('HLEN', KEYS[6])
end
return {1, tonumber(m[1]), tonumber(m[2]), tonumber(m[3]), tonumber(m[4]), tonumber(m[5]),
  tonumber(m[6]), redis.call('HLEN', KEYS[2]), redis.call('HLEN', KEYS[3]), flags,
  tonumber(m[8]) or 0, tonumber(m[9]) or 0, tonumber(m[10]) or 0, tonumber(m[11]) or 0, pending}
