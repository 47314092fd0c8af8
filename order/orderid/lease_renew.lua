-- lease_renew.lua: renew (or give up) a machine-ID lease we own, and raise
-- the floor to the generator's high-water mark.
-- KEYS[1] lease key   (string: owner token)
-- KEYS[2] floor key   (string: highest ms used; no TTL)
-- ARGV[1] owner token
-- ARGV[2] lease TTL in milliseconds
-- ARGV[3] high-water mark in ms (the generator's last timestamp + margin)
-- ARGV[4] "1" to release the lease (DEL) instead of renewing it
-- Returns: 1 renewed/released; 0 not the owner (lease lost; floor untouched).
-- Time: none read; the TTL is Redis's.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
local f = tonumber(redis.call('GET', KEYS[2]) or '0')
local h = tonumber(ARGV[3])
if h > f then
  redis.call('SET', KEYS[2], ARGV[3])
end
if ARGV[4] == '1' then
  redis.call('DEL', KEYS[1])
else
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 1
