-- group_scan.lua: writes nothing (run with EVALSHA: miniredis refuses TIME in
-- EVALSHA_RO); one HSCAN page of a limit
-- group's ledger with its records, and Redis now, for Deductor.SweepGroup.
--
-- KEYS[1] ledger  hash  line reservation ID -> "user:qty:state:atMs[:...]"  <prefix>{g:<group>}:resv
--                       (group_take.lua; state R taken: "...:R:atMs:activity")
-- ARGV[1] cursor ("0" to start)
-- ARGV[2] COUNT hint (> 0)
--
-- Now: Redis TIME (milliseconds), returned for the sweep's age test.
--
-- Returns {nextCursor, nowMs, {id, record, id, record, ...}}
--   nextCursor is "0" when the scan is complete.

local r = redis.call('HSCAN', KEYS[1], ARGV[1], 'COUNT', ARGV[2])
local t = redis.call('TIME')
return {r[1], tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000), r[2]}
