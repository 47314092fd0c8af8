-- remaining.lua: read-only (run with EVALSHA_RO); the live stock of one activity.
--
-- KEYS[1] meta  hash  stock, ...   <prefix>{a:<id>}:meta
--
-- Returns {loaded, remaining}: loaded 1 when the activity is loaded, else 0.

local s = redis.call('HGET', KEYS[1], 'stock')
if not s then
  return {0, 0}
end
return {1, tonumber(s)}
