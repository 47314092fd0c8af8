-- blacklist_check.lua: read the ban keys of one subject's user, IP and
-- device (Blacklist.Check's GETs, as one read for Checker.CheckCheck).
--
-- KEYS[1..n]  ban keys  <prefix>risk:{bl:<kind>:<id>}:ban, in the order of
--             precedence (user, IP address, its networks, device),
--             1 <= n <= 7
--
-- Does not read the clock. Returns {v1, ..., vn}: each ban key's value
-- ("until_ms|offence|reason"), or nil (false) when the key does not exist.
local out = {}
for i = 1, #KEYS do
  out[i] = redis.call('GET', KEYS[i])
end
return out
