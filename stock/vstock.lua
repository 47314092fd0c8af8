-- vstock.lua: read the stock of every variant of an activity (read-only,
-- run with EVALSHA_RO).
--
-- KEYS[1]          vars  hash  list, limit, exp       <prefix>{a:<id>}:vars
-- KEYS[2 .. V+1]   the meta hash of each variant, in list order
-- ARGV[1] the variant list the caller believes (vars.list; "" when unknown)
--
-- Returns {0, list} when vars is absent (list "") or its list is not
-- ARGV[1] (the caller learns the list and asks again); otherwise
-- {1, limit, {stock_1, limit_1, ..., stock_V, limit_V}}, -1 for the stock and
-- limit of a variant whose meta is absent.

local vars = redis.call('HMGET', KEYS[1], 'list', 'limit')
if not vars[1] then
  return {0, ''}
end
if vars[1] ~= ARGV[1] then
  return {0, vars[1]}
end
local vals = {}
for i = 2, #KEYS do
  local m = redis.call('HMGET', KEYS[i], 'stock', 'limit')
  vals[#vals + 1] = tonumber(m[1]) or -1
  vals[#vals + 1] = tonumber(m[2]) or -1
end
return {1, tonumber(vars[2]) or 0, vals}
