-- claim.lua: redeem a solved proof-of-work challenge once, atomically.
-- KEYS[1] the challenge's one-time record (a STRING)
-- ARGV[1] TTL ms: until the challenge has expired on every server
-- Returns: 1 claimed (first redemption), 0 already redeemed.
-- Time: the caller's clock, as the relative TTL in ARGV[1].
if redis.call('SET', KEYS[1], '1', 'NX', 'PX', ARGV[1]) then return 1 end
return 0
