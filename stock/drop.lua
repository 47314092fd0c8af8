-- drop.lua: delete the keys of one shard of an old layout, after a Reset or
-- Rebuild changed the number of shards (the new directory is written first,
-- so a Deductor that finds a dropped shard looks the layout up again).
--
-- KEYS[1..7] meta, buyers, ledger, ever, adj, xout, xin of that shard
--
-- Returns the number of keys deleted.

return redis.call('DEL', unpack(KEYS))
