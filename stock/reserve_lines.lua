-- reserve_lines.lua: reserve several lines of one activity with variants,
-- all or nothing, in one atomic call (a single variant Reserve is one line).
-- Each line is decided as reserve.lua decides a request on its variant's
-- ledger (replay, not loaded, frozen, paused, qty above the variant's
-- limit, window, stock, the variant's per-user cap with norebuy), and then
-- against the activity's per-user limit over all its variants: the units
-- the buyer holds in every variant + the units of the new lines <= limit.
-- If any line is refused nothing is written.
--
-- KEYS[1]              vars    hash  list, limit, exp        <prefix>{a:<id>}:vars
-- KEYS[4i-2 .. 4i+1]   line i: meta, buyers, ledger, ever of its variant
--                                      <prefix>{a:<id>}:v:<variant>:meta|buyers|resv|ever
-- KEYS[4L+2 .. 4L+1+V] the buyers hash of every variant of the activity
-- ARGV[1] L, the number of lines (1..64)
-- ARGV[2] V, the number of variants the caller believes (0 when unknown)
-- ARGV[3] the variant list the caller believes (vars.list; "" when unknown)
-- ARGV[4] user ID (a string, never converted to a Lua number)
-- ARGV[5 .. 4+L]     the line reservation IDs
-- ARGV[5+L .. 4+2L]  the line quantities (> 0, <= 2^53-1)
--
-- Now: Redis TIME (milliseconds), read once.
--
-- Returns {0, list} when vars is absent (list "") or its list is not
-- ARGV[3]: nothing decided, the caller learns the list and asks again.
-- Otherwise {1, {reply_1, ..., reply_L}}, each reply the array reserve.lua
-- returns: {code, remaining, held, atMs, replayed, limit, epoch, seq, exp, born, origin}
-- with reserve.lua's codes (1 reserved, 2 sold out, 3 limit reached (the
-- variant's or the activity's), 4 not started, 5 ended, 6 not loaded,
-- 7 released, 8 frozen, 10 paused, -1 qty above the variant's limit,
-- -2 reservation ID conflict), and 12 for a line that would have been
-- reserved but was not because another line was refused.

local L, V = tonumber(ARGV[1]), tonumber(ARGV[2])
local user = ARGV[4]
local vars = redis.call('HMGET', KEYS[1], 'list', 'limit')
if not vars[1] then
  return {0, ''}
end
if vars[1] ~= ARGV[3] then
  return {0, vars[1]}
end
local plimit = tonumber(vars[2]) or 0
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local out = {}
local refused = false
local new = {}
for i = 1, L do
  local mk, bk, lk = KEYS[4 * i - 2], KEYS[4 * i - 1], KEYS[4 * i]
  local id, qs = ARGV[4 + i], ARGV[4 + L + i]
  local k = i
  local rec = redis.call('HGET', lk, id)
  if rec then
    local u, q, s, at = string.match(rec, '^([^:]*):(%d+):(%a):(%d+)')
    local m = redis.call('HMGET', mk, 'stock', 'limit', 'epoch', 'seq', 'exp', 'born', 'origin')
    local rem, limit = tonumber(m[1]) or 0, tonumber(m[2]) or 0
    local e, sq, ex, b, o = tonumber(m[3]) or 0, tonumber(m[4]) or 0, tonumber(m[5]) or 0,
      tonumber(m[6]) or 0, tonumber(m[7]) or 0
    if s == 'T' then
      out[k] = {7, rem, 0, tonumber(at), 1, limit, e, sq, ex, b, o}
      refused = true
    elseif u ~= user or q ~= qs then
      out[k] = {-2, rem, 0, tonumber(at), 1, limit, e, sq, ex, b, o}
      refused = true
    else
      local held = tonumber(redis.call('HGET', bk, user)) or 0
      if s == 'R' then
        out[k] = {1, rem, held, tonumber(at), 1, limit, e, sq, ex, b, o}
      else
        out[k] = {7, rem, held, tonumber(at), 1, limit, e, sq, ex, b, o}
        refused = true
      end
    end
  else
    new[#new + 1] = i
  end
end

local sum = nil -- units the buyer holds over every variant, read once
local adding = 0
local plan = {}
for _, i in ipairs(new) do
  local mk, bk = KEYS[4 * i - 2], KEYS[4 * i - 1]
  local qty = tonumber(ARGV[4 + L + i])
  local m = redis.call('HMGET', mk, 'stock', 'limit', 'start', 'end', 'exp', 'frozen',
    'epoch', 'seq', 'born', 'origin', 'paused', 'norebuy')
  if not m[1] then
    out[i] = {6, 0, 0, now, 0, 0, 0, 0, 0, 0, 0}
    refused = true
  else
    local stock, limit, exp = tonumber(m[1]), tonumber(m[2]), tonumber(m[5])
    local e, sq, b, o = tonumber(m[7]) or 0, tonumber(m[8]) or 0, tonumber(m[9]) or 0, tonumber(m[10]) or 0
    local st, en = tonumber(m[3]), tonumber(m[4])
    local k = i
    if m[6] == '1' then
      out[k] = {8, stock, 0, now, 0, limit, e, sq, exp, b, o}
    elseif m[11] == '1' then
      out[k] = {10, stock, 0, now, 0, limit, e, sq, exp, b, o}
    elseif qty > limit then
      out[k] = {-1, stock, 0, 0, 0, limit, e, sq, exp, b, o}
    elseif st > 0 and now < st then
      out[k] = {4, stock, 0, now, 0, limit, e, sq, exp, b, o}
    elseif en > 0 and now >= en then
      out[k] = {5, stock, 0, now, 0, limit, e, sq, exp, b, o}
    elseif stock < qty then
      out[k] = {2, stock, 0, now, 0, limit, e, sq, exp, b, o}
    else
      local held = tonumber(redis.call('HGET', bk, user)) or 0
      local norebuy = m[12] == '1'
      local used = held
      if norebuy then
        used = math.max(held, tonumber(redis.call('HGET', KEYS[4 * i + 1], user)) or 0)
      end
      if sum == nil then
        -- The buyers hash of this line's variant was just read: held.
        sum = 0
        for j = 1, V do
          local vk = KEYS[4 * L + 1 + j]
          if vk == bk then
            sum = sum + held
          else
            sum = sum + (tonumber(redis.call('HGET', vk, user)) or 0)
          end
        end
      end
      if used + qty > limit or sum + adding + qty > plimit then
        out[k] = {3, stock, held, now, 0, limit, e, sq, exp, b, o}
      else
        adding = adding + qty
        plan[#plan + 1] = {i, qty, used, norebuy, exp}
        out[k] = {1, stock - qty, held + qty, now, 0, limit, e, sq + 1, exp, b, o}
      end
    end
    if out[k][1] ~= 1 then
      refused = true
    end
  end
end

if refused then
  for _, p in ipairs(plan) do
    local k = p[1]
    out[k] = {12, 0, 0, now, 0, 0, 0, 0, 0, 0, 0}
  end
  return {1, out}
end
for _, p in ipairs(plan) do
  local i, qty, used, norebuy, exp = p[1], p[2], p[3], p[4], p[5]
  local mk, bk, lk, ek = KEYS[4 * i - 2], KEYS[4 * i - 1], KEYS[4 * i], KEYS[4 * i + 1]
  redis.call('HINCRBY', mk, 'stock', -qty)
  redis.call('HINCRBY', mk, 'seq', 1)
  redis.call('HINCRBY', bk, user, qty)
  redis.call('HSET', lk, ARGV[4 + i], user .. ':' .. ARGV[4 + L + i] .. ':R:' .. now)
  if norebuy then
    redis.call('HSET', ek, user, used + qty)
  end
  if exp > 0 then
    redis.call('PEXPIREAT', bk, exp)
    redis.call('PEXPIREAT', lk, exp)
    if norebuy then
      redis.call('PEXPIREAT', ek, exp)
    end
  end
end
return {1, out}
