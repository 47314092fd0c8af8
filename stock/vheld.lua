-- vheld.lua: read-only (run with EVALSHA_RO); what one buyer holds in
-- an activity with variants, over all its variants.
--
-- KEYS[1]          vars  hash  list, limit, exp     <prefix>{a:<id>}:vars
-- KEYS[2 .. V+1]   the buyers hash of each variant, in list order
--                                  <prefix>{a:<id>}:v:<variant>:buyers
-- ARGV[1] the variant list the caller believes (vars.list; "" when unknown)
-- ARGV[2] user ID (a string; see reserve.lua)
--
-- Now: not read.
--
-- Every key shares the activity's hash tag: one Cluster slot.
--
-- Returns {0, list} when vars is absent (list "") or its list is not
-- ARGV[1] (the caller learns the list and asks again); otherwise {1, held},
-- held the sum of the buyer's held quantity in every variant (0 when none).

local list = redis.call('HGET', KEYS[1], 'list')
if not list then
  return {0, ''}
end
if list ~= ARGV[1] then
  return {0, list}
end
local held = 0
for i = 2, #KEYS do
  held = held + (tonumber(redis.call('HGET', KEYS[i], ARGV[2])) or 0)
end
return {1, held}
