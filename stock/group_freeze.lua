-- group_freeze.lua: freeze a limit group whose data a Deductor saw lost or
-- rolled back (group_fence.go): its new takes are refused until
-- RebuildGroup starts a new epoch. A group without meta is left alone (the
-- next take makes one, and the fence judges it).
--
-- KEYS[1] meta    hash  the group's fence                    <prefix>{g:<group>}:meta
--
-- Returns 1 frozen, 0 no meta

if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
redis.call('HSET', KEYS[1], 'frozen', '1')
return 1
