-- freshness_forget.lua: forget one freshness scope (PRODUCT §17): its hash, its due entry and
-- its place among the scopes, in one step.
--
-- KEYS[1] f:<member>   KEYS[2] fd:<name> (due index)   KEYS[3] fs:<name> (scopes by stale_at)
-- ARGV[1] the scope
-- Returns 1 if the scope existed, else 0. A sync job still active keeps its `fs` field: when
-- it ends, fresh_ended finds no scope naming it and changes nothing.
local existed = redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
return existed
