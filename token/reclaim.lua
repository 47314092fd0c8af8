-- reclaim.lua: return up to ARGV[2] expired bound-but-unused tokens to the pool.
-- KEYS[1] free  KEYS[2] state  KEYS[3] owner  KEYS[4] exp  KEYS[5] meta
-- ARGV[1] now (ms; 0 = Redis TIME)  ARGV[2] batch limit (> 0)
-- Returns: integer, tokens returned by this call.
-- Time: now_ms(ARGV[1]).
return reclaim_expired(now_ms(ARGV[1]), tonumber(ARGV[2]))
