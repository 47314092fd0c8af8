-- rebuild.lua: rebuild one activity, or one shard of a sharded activity,
-- from the caller's truth (the orders that still hold stock), when its meta
-- is absent or frozen; one atomic step.
--
-- KEYS[1] meta    hash  stock, total, limit, start, end, exp,     <prefix>{a:<id>}:meta
--                       epoch, seq, born, origin, frozen, paused, norebuy
-- KEYS[2] buyers  hash  user -> held qty                       <prefix>{a:<id>}:buyers
-- KEYS[3] ledger  hash  reservationID -> "user:qty:state:atMs[:relMs]"  <prefix>{a:<id>}:resv
-- KEYS[4] ever    hash  units ever reserved per user: kept (what survived;
--                       reserve.lua counts max(held, ever), so the rebuilt
--                       held quantities count in any case)
-- KEYS[5] adj     hash  adjustment log: kept, so a retried Adjust of an
--                       adjustment the caller's total already includes is
--                       replayed, not applied again
-- KEYS[6] xout    hash  (shards only) transfers out: deleted
-- KEYS[7] xin     hash  (shards only) transfers in: deleted
-- ARGV[1] total stock of the activity, or of this shard (>= 0, <= 2^53-1)
-- ARGV[2] per-user limit (>= 1, <= 2^53-1)
-- ARGV[3] start, unix ms (0 = open from now)
-- ARGV[4] end, unix ms (0 = no end)
-- ARGV[5] TTL in ms, counted from end (or from now when end is 0)
-- ARGV[6] the new epoch: a random integer in [1, 2^52) chosen by the caller
-- ARGV[7] precondition: "" meta absent or frozen; "0" meta absent; any other
--         value: meta frozen with exactly this epoch
-- ARGV[8] n, the number of live reservations that follow
-- ARGV[9] "1" = leave the rebuilt state frozen (a sharded activity's shards
--         stay frozen until every one of them is rebuilt)
-- ARGV[10] "1" = norebuy (see load.lua)
-- ARGV[11..10+4n] per reservation: reservationID, user ID, qty (> 0), reserved-at
--         unix ms (0 = now); the caller has checked IDs unique, per-user
--         sums <= limit and the sum <= total (checked again below)
--
-- Writes, after deleting the keys: meta with stock = total - sum(qty), a
-- new epoch, seq 0, frozen 0 (1 when ARGV[9] is "1"), paused 0, norebuy
-- ARGV[10], origin 3 (rebuild),
-- born = Redis now (or the old born + 1 if that is not later); buyers = sum
-- of qty per user; ledger = one held (R) entry per reservation. All three
-- expire at end + TTL, like load.lua. Fields go in HSET chunks of 500 so no call unpacks more than
-- 1,001 values (Lua's C stack holds about 8,000).
--
-- Now: Redis TIME (milliseconds), for expiry, born and entries with at 0.
--
-- Returns {code, loaded, stock, total, limit, start, end, exp, buyers,
--          ledger, flags, epoch, seq}   (the fields of stats.lua after the
--          rebuild; zeros unless code is 1)
--   code 1 rebuilt, -1 the keys would expire at once (end + TTL is past),
--        -2 the activity is live (meta present and not frozen), -3 the
--        precondition ARGV[7] does not hold, -4 the live quantities exceed
--        the total, -5 a user would hold more than the limit, -6 a
--        duplicate reservation ID (nothing written for any code but 1)

local function fail(code)
  return {code, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
end

local m = redis.call('HMGET', KEYS[1], 'stock', 'frozen', 'epoch', 'born')
if m[1] and m[2] ~= '1' then
  return fail(-2)
end
if ARGV[7] == '0' then
  if m[1] then
    return fail(-3)
  end
elseif ARGV[7] ~= '' then
  if not m[1] or m[3] ~= ARGV[7] then
    return fail(-3)
  end
end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local st, en, ttl = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local exp = now + ttl
if en > 0 then
  exp = en + ttl
end
if exp <= now then
  return fail(-1)
end

local total, limit, n = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[8])
local held, users, seen, sum = {}, {}, {}, 0
for i = 0, n - 1 do
  local j = 11 + 4 * i
  local id, u, q = ARGV[j], ARGV[j + 1], tonumber(ARGV[j + 2])
  if seen[id] then
    return fail(-6)
  end
  seen[id] = true
  if not held[u] then
    held[u] = 0
    users[#users + 1] = u
  end
  held[u] = held[u] + q
  sum = sum + q
end
if sum > total then
  return fail(-4)
end
for _, u in ipairs(users) do
  if held[u] > limit then
    return fail(-5)
  end
end

local born = now
local old = tonumber(m[4])
if old and old >= born then
  born = old + 1
end
local stock = total - sum
local frozen = '0'
if ARGV[9] == '1' then
  frozen = '1'
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
if KEYS[7] then
  redis.call('DEL', KEYS[6], KEYS[7])
end
redis.call('HSET', KEYS[1], 'stock', stock, 'total', ARGV[1], 'limit', ARGV[2],
  'start', ARGV[3], 'end', ARGV[4], 'exp', exp,
  'epoch', ARGV[6], 'seq', 0, 'born', born, 'origin', 3, 'frozen', frozen,
  'paused', '0', 'norebuy', ARGV[10])
redis.call('PEXPIREAT', KEYS[1], exp)

local chunk = 500
local args = {}
local function flush(key)
  if #args > 0 then
    redis.call('HSET', key, unpack(args))
    args = {}
  end
end
for i = 0, n - 1 do
  local j = 11 + 4 * i
  local at = ARGV[j + 3]
  if at == '0' then
    at = now
  end
  args[#args + 1] = ARGV[j]
  args[#args + 1] = ARGV[j + 1] .. ':' .. ARGV[j + 2] .. ':R:' .. at
  if #args >= 2 * chunk then
    flush(KEYS[3])
  end
end
flush(KEYS[3])
for _, u in ipairs(users) do
  args[#args + 1] = u
  args[#args + 1] = held[u]
  if #args >= 2 * chunk then
    flush(KEYS[2])
  end
end
flush(KEYS[2])
if n > 0 then
  redis.call('PEXPIREAT', KEYS[2], exp)
  redis.call('PEXPIREAT', KEYS[3], exp)
end

local flags = tonumber(frozen)
if ARGV[10] == '1' then
  flags = flags + 4
end
return {1, 1, stock, total, limit, st, en, exp, #users, n, flags, tonumber(ARGV[6]), 0}
