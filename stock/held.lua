-- held.lua: read-only (run with EVALSHA_RO); what one buyer holds in one activity.
--
-- KEYS[1] meta    hash  stock, ...          <prefix>{a:<id>}:meta
-- KEYS[2] buyers  hash  user -> held qty    <prefix>{a:<id>}:buyers
-- ARGV[1] user ID (decimal string)
--
-- Now: not read.
--
-- Returns {loaded, held}: loaded 1 when the activity is loaded, else 0;
-- held is the buyer's held quantity (0 when none).

if redis.call('EXISTS', KEYS[1]) == 0 then
  return {0, 0}
end
return {1, tonumber(redis.call('HGET', KEYS[2], ARGV[1])) or 0}
