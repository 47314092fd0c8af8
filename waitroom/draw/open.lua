-- open.lua: open a sale's entry window with the seed's commitment.
-- KEYS[1] meta (HASH)
-- ARGV[1] commitment (hex sha256 of the seed)
-- Returns: 1 open (or already open with this commitment); -1 another
-- commitment is stored (it is fixed once set).
local c = redis.call('HGET', KEYS[1], 'commit')
if c and c ~= ARGV[1] then return -1 end
redis.call('HSET', KEYS[1], 'commit', ARGV[1])
return 1
