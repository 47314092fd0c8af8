-- reserve_many.lua: decide n Reserve requests of one activity in one atomic
-- call (coalescing, see coalesce.go). Each request is decided exactly as
-- reserve.lua decides it, one after the other in ARGV order, each seeing the
-- writes of the ones before it: ledger replay (a reservation ID decided earlier
-- in the same call is replayed from that decision), frozen, paused,
-- per-user limit, window, stock, per-user cap (with norebuy: also the units
-- ever reserved), then the deduction and the ledger entry.
--
-- KEYS[1] meta    hash  stock, total, limit, start, end, exp,     <prefix>{a:<id>}:meta
--                       epoch, seq, born, origin, frozen, paused, norebuy
-- KEYS[2] buyers  hash  user -> held qty                       <prefix>{a:<id>}:buyers
-- KEYS[3] ledger  hash  reservationID -> "user:qty:state:atMs[:relMs]"  <prefix>{a:<id>}:resv
--                       state R = held, X = released, T = tombstone (released before reserved)
-- KEYS[4] ever    hash  user -> units ever reserved (only when norebuy is 1)
-- (further KEYS, adj and a shard's xout and xin, are not touched)
-- ARGV[1]               n, the number of requests (1..1024)
-- ARGV[2 .. n+1]        reservation IDs
-- ARGV[n+2 .. 2n+1]     user IDs (strings of [A-Za-z0-9._@+-]; never converted to Lua numbers)
-- ARGV[2n+2 .. 3n+1]    quantities (> 0, <= 2^53-1)
--
-- Now: Redis TIME (milliseconds), read once: every decision of the call is
-- taken at the same instant.
--
-- Returns an array of n replies, the i-th for the i-th request, each the
-- array reserve.lua returns:
--   {code, remaining, held, atMs, replayed, limit, epoch, seq, exp, born, origin}
-- with the same codes (1 reserved, 2 sold out, 3 limit reached, 4 not
-- started, 5 ended, 6 not loaded, 7 released, 8 frozen, 10 paused, -1 qty above the
-- per-user limit, -2 reservation ID conflict, 9 KEYS[1] is the directory of a
-- sharded activity: every reply is then code 9 with the number of shards
-- as remaining) and the same values: seq is the
-- value after that decision, remaining and held are the values after it.
-- Denials write nothing. The writes of all reservations of the call are made
-- at the end, in one HSET per hash and one HINCRBY per buyer; the state they
-- leave is the one the same requests would leave through reserve.lua, one
-- after the other (the ledger entries carry the call's one Redis time).

local n = tonumber(ARGV[1])
local ids = redis.call('HMGET', KEYS[3], unpack(ARGV, 2, n + 1))
local hs = redis.call('HMGET', KEYS[2], unpack(ARGV, n + 2, 2 * n + 1))
local m = redis.call('HMGET', KEYS[1], 'stock', 'limit', 'start', 'end', 'exp', 'frozen',
  'epoch', 'seq', 'born', 'origin', 'paused', 'norebuy')
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

if not m[1] then
  local shards = redis.call('HGET', KEYS[1], 'shards')
  if shards then
    local out = {}
    for i = 1, n do
      out[i] = {9, tonumber(shards), 0, now, 0, 0, 0, 0, 0, 0, 0}
    end
    return out
  end
end

local stock = tonumber(m[1]) -- nil: not loaded
local limit = tonumber(m[2])
local st, en, exp = tonumber(m[3]), tonumber(m[4]), tonumber(m[5])
local frozen = m[6] == '1'
local paused = m[11] == '1'
local norebuy = m[12] == '1'
local evs = {}
if norebuy then
  evs = redis.call('HMGET', KEYS[4], unpack(ARGV, n + 2, 2 * n + 1))
end
local e, sq, b, o = tonumber(m[7]) or 0, tonumber(m[8]) or 0, tonumber(m[9]) or 0, tonumber(m[10]) or 0
-- What reserve.lua's replay branch reads (0 for a missing meta).
local rlimit, rexp = limit or 0, exp or 0

local fresh = {} -- reservation ID -> ledger record written by this call
local held = {}  -- user -> units held, once read or changed by this call
local ever = {}  -- user -> units ever reserved (norebuy), once read or changed
local delta = {} -- user -> units reserved by this call
local users = {} -- users with a delta, in order
local entries = {} -- ledger HSET arguments
local taken, wrote = 0, 0
local out = {}

local function heldOf(i, user)
  local h = held[user]
  if h == nil then
    h = tonumber(hs[i]) or 0
    held[user] = h
  end
  return h
end

local function everOf(i, user)
  local v = ever[user]
  if v == nil then
    v = tonumber(evs[i]) or 0
    ever[user] = v
  end
  return v
end

for i = 1, n do
  local id, user, qs = ARGV[1 + i], ARGV[n + 1 + i], ARGV[2 * n + 1 + i]
  local rec = fresh[id] or ids[i]
  local rem = stock or 0
  if rec then
    local u, q, s, at = string.match(rec, '^([^:]*):(%d+):(%a):(%d+)')
    if s == 'T' then
      out[i] = {7, rem, 0, tonumber(at), 1, rlimit, e, sq, rexp, b, o}
    elseif u ~= user or q ~= qs then
      out[i] = {-2, rem, 0, tonumber(at), 1, rlimit, e, sq, rexp, b, o}
    elseif s == 'R' then
      out[i] = {1, rem, heldOf(i, user), tonumber(at), 1, rlimit, e, sq, rexp, b, o}
    else
      out[i] = {7, rem, heldOf(i, user), tonumber(at), 1, rlimit, e, sq, rexp, b, o}
    end
  elseif not stock then
    out[i] = {6, 0, 0, now, 0, 0, 0, 0, 0, 0, 0}
  elseif frozen then
    out[i] = {8, stock, 0, now, 0, limit, e, sq, exp, b, o}
  elseif paused then
    out[i] = {10, stock, 0, now, 0, limit, e, sq, exp, b, o}
  else
    local qty = tonumber(qs)
    if qty > limit then
      out[i] = {-1, stock, 0, 0, 0, limit, e, sq, exp, b, o}
    elseif st > 0 and now < st then
      out[i] = {4, stock, 0, now, 0, limit, e, sq, exp, b, o}
    elseif en > 0 and now >= en then
      out[i] = {5, stock, 0, now, 0, limit, e, sq, exp, b, o}
    elseif stock < qty then
      out[i] = {2, stock, 0, now, 0, limit, e, sq, exp, b, o}
    else
      local h = heldOf(i, user)
      local used = h
      if norebuy then
        used = math.max(h, everOf(i, user))
      end
      if used + qty > limit then
        out[i] = {3, stock, h, now, 0, limit, e, sq, exp, b, o}
      else
        if norebuy then
          ever[user] = used + qty
        end
        stock = stock - qty
        taken = taken + qty
        sq = sq + 1
        wrote = wrote + 1
        held[user] = h + qty
        if delta[user] == nil then
          delta[user] = qty
          users[#users + 1] = user
        else
          delta[user] = delta[user] + qty
        end
        local v = user .. ':' .. qs .. ':R:' .. now
        fresh[id] = v
        entries[#entries + 1] = id
        entries[#entries + 1] = v
        out[i] = {1, stock, h + qty, now, 0, limit, e, sq, exp, b, o}
      end
    end
  end
end

if wrote > 0 then
  redis.call('HINCRBY', KEYS[1], 'stock', -taken)
  redis.call('HINCRBY', KEYS[1], 'seq', wrote)
  for _, u in ipairs(users) do
    redis.call('HINCRBY', KEYS[2], u, delta[u])
    if norebuy then
      redis.call('HSET', KEYS[4], u, ever[u])
    end
  end
  redis.call('HSET', KEYS[3], unpack(entries))
  if exp > 0 then
    redis.call('PEXPIREAT', KEYS[2], exp)
    redis.call('PEXPIREAT', KEYS[3], exp)
    if norebuy then
      redis.call('PEXPIREAT', KEYS[4], exp)
    end
  end
end
return out
