-- retry.lua: re-queue one failed or cancelled job with fresh attempts.
--
-- KEYS[1] expiry zset   KEYS[2] unique holds hash (`u`)
-- ARGV[1] prefix   ARGV[2] job id   ARGV[3] wake channel   ARGV[4] now
-- Returns 1 if re-queued, 0 if the job is in another state or unknown, if another active job
-- holds the unique key it takes again, or if it is a dependent with a dependency that has not
-- succeeded (`aw` > 0, _dependencies.lua: that dependency's success releases it).
--
-- A job whose hold lasted until it finished (its `u` field is still there, keys.py "Unique
-- holds") takes its key again (u[key] = id), unless another job holds it at `now`: then
-- nothing changes. The job leaves s:<status> and `exp`; becomes `queued` at its FIFO place (by
-- enqueued_at) with attempts and lost reset to 0; finished_at, result, expire_at, started_at,
-- worker, lease and rate slot are removed; the error history (x) is kept. Its queue is woken.
-- A group member's outcome is taken back from its group (unsettle_member): pending again.
--@include _operator
local woken = {}
local done = retry_one(KEYS, ARGV[2], ARGV[4], '', woken)
trim_events()
publish_all(ARGV[3], woken)
return done
