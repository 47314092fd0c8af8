-- admit.lua: admit the next users whose turn it is, as far as the shared
-- allowance and the cap on active users allow.
-- KEYS[1] meta (HASH)  KEYS[2] ent (HASH)  KEYS[3] pq (LIST, shuffled
-- pre-queue)  KEYS[4] q (LIST, after the start)  KEYS[5] adm (ZSET user ->
-- deadline ms)
-- ARGV[1] now (ms; 0 = Redis TIME)  ARGV[2] pass TTL (ms)
-- ARGV[3] abandon after (ms; 0 = never)  ARGV[4] most entries looked at
-- ARGV[5] most admitted
-- Returns: {code, user...}: code >= 0 the number admitted, followed by
-- the admitted users in admission order; -1 not configured; -2 paused,
-- not started, or the pre-queue not yet placed (nothing admitted).
-- Allowance: a token bucket in meta ("tok", "last"): rate tokens per
-- second, at most one second's worth (at least 1) carried; an abandoned
-- entry skipped here takes no token. Cap: ZCARD adm after the lapsed
-- admissions are dropped.
-- Time: now_ms(ARGV[1]) (Redis TIME unless the caller injects a clock).
local now = now_ms(ARGV[1])
local meta = KEYS[1]
if redis.call('EXISTS', meta) == 0 then return {-1} end
if redis.call('HGET', meta, 'paused') == '1' then return {-2} end
if not started(meta, now) then return {-2} end
local pcount = tonumber(redis.call('HGET', meta, 'pcount') or '0')
if pcount > 0 and redis.call('HGET', meta, 'pqdone') ~= '1' then return {-2} end
redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', now)
local rate = tonumber(redis.call('HGET', meta, 'rate') or '0') or 0
local cap = tonumber(redis.call('HGET', meta, 'cap') or '0') or 0
local want = tonumber(ARGV[5])
local tok = 0
if rate > 0 then
  tok = tonumber(redis.call('HGET', meta, 'tok') or '0') or 0
  local last = tonumber(redis.call('HGET', meta, 'last') or '-1') or -1
  if last >= 0 and now > last then
    tok = math.min(math.max(rate, 1), tok + (now - last) * rate / 1000)
  end
  if last < 0 or now > last then redis.call('HSET', meta, 'last', string.format('%d', now)) end
  want = math.min(want, math.floor(tok))
end
if cap > 0 then want = math.min(want, cap - redis.call('ZCARD', KEYS[5])) end
local out = {0}
local n, looked, skipped, popped = 0, 0, 0, 0
local limit = tonumber(ARGV[4])
local abandon = tonumber(ARGV[3])
local ssec = start_sec(meta)
local dl = now + tonumber(ARGV[2])
while n < want and looked < limit do
  local u = redis.call('LPOP', KEYS[3])
  if not u then u = redis.call('LPOP', KEYS[4]) end
  if not u then break end
  looked = looked + 1
  popped = popped + 1
  local v = redis.call('HGET', KEYS[2], u)
  if v then
    local kind, place, seen = split(v)
    if kind == 'P' or kind == 'f' then
      if abandon > 0 and now - (ssec + seen) * 1000 > abandon then
        redis.call('HSET', KEYS[2], u, 'x')
        skipped = skipped + 1
      else
        redis.call('HSET', KEYS[2], u, 'a')
        redis.call('ZADD', KEYS[5], dl, u)
        n = n + 1
        out[n + 1] = u
      end
    end
  end
end
if rate > 0 then redis.call('HSET', meta, 'tok', tostring(tok - n)) end
if popped > 0 then redis.call('HINCRBY', meta, 'head', popped) end
if n > 0 then redis.call('HINCRBY', meta, 'admitted', n) end
if skipped > 0 then redis.call('HINCRBY', meta, 'abandoned', skipped) end
out[1] = n
return out
