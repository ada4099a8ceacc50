-- cancel.lua: cancel one scheduled, queued (possibly parked), retrying or running job.
--
-- KEYS[1] running zset   KEYS[2] due zset   KEYS[3] expiry zset   KEYS[4] queue counts
-- KEYS[5] unique holds hash (`u`)
-- ARGV[1] prefix   ARGV[2] job id   ARGV[3] now   ARGV[4] expire_at ('' = never)
-- ARGV[5] wake channel
-- Returns 1 if cancelled, 0 if the job is finished or unknown.
--
-- A waiting job leaves whichever index holds it (`due`, its ready zset, its gate's parked
-- zset) and becomes `cancelled` with finished_at = now, in s:cancelled and `exp`; a gated job
-- cancelled from its ready zset unparks the next parked job of its gate (its queue is woken);
-- the unique hold ends (end_hold); it emits its event, and a group member is recorded in its
-- group (settle_member, which may queue the group's callback); its dependents still waiting
-- are cancelled (dependency_ended, _dependencies.lua).
-- A running job only gets the request: field `c` = ARGV[4] (the expire_at it will get). It
-- stays `running` (in `run`, holding its gate slot and unique key) until its run ends: its
-- worker's heartbeat reports it (heartbeat.lua), and finish.lua, or recover.lua if the worker
-- died, makes it `cancelled` whatever the outcome.
--@include _operator
local counts, woken = {}, {}
local done = cancel_one(KEYS, ARGV[2], ARGV[3], ARGV[4], '', counts, woken)
trim_events()
flush_counts(KEYS[4], counts)
publish_all(ARGV[5], woken)
return done
