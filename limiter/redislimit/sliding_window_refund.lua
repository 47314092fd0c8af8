-- sliding_window_refund.lua: give back n events (SlidingWindow.RefundN).
--
-- KEYS[1]  the sliding log of sliding_window.lua
-- ARGV[1]  n: events to give back (integer > 0)
--
-- Removes the n newest members (any n recent events count the same).
-- Does not read the clock. Returns the number of members removed.
local n = tonumber(ARGV[1])
return redis.call('ZREMRANGEBYRANK', KEYS[1], -n, -1)
