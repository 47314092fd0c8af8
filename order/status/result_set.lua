-- result_set.lua: record the status of (activity, user) without letting a
-- late QUEUED overwrite the final status of the same reservation.
-- KEYS[1] result hash {status, order_no, reason, resv, at}
-- ARGV[1] status (QUEUED / SUCCESS / FAILED)
-- ARGV[2] order number ('' when none)
-- ARGV[3] reason ('' when none)
-- ARGV[4] reservation ID
-- ARGV[5] time in unix ms (from the caller's injected clock)
-- ARGV[6] TTL in milliseconds
-- Returns: 1 written; 0 skipped (QUEUED after a final status of the same
--          reservation).
-- Time: the caller's clock, passed in ARGV[5]; only stored, never compared.
if ARGV[1] == 'QUEUED' then
  local cur = redis.call('HMGET', KEYS[1], 'status', 'resv')
  if cur[2] == ARGV[4] and cur[1] and cur[1] ~= 'QUEUED' then
    return 0
  end
end
redis.call('HSET', KEYS[1], 'status', ARGV[1], 'order_no', ARGV[2], 'reason', ARGV[3], 'resv', ARGV[4], 'at', ARGV[5])
redis.call('PEXPIRE', KEYS[1], ARGV[6])
return 1
