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
--@include _jobs
--@include _unique
--@include _events
--@include _groups
local id = ARGV[2]
local jk = job_key(id)
local f = redis.call('HMGET', jk, 's', 'q', 'r', 'e', 'u', 't', 'k', 'gp', 'aw')
local status, queue, hold = f[1], f[2], f[5]
if status ~= 'failed' and status ~= 'cancelled' then return 0 end
-- A dependent cancelled by a dependency runs when that one succeeds, not on its own.
if (tonumber(f[9]) or 0) > 0 then return 0 end
if hold then
  local holder = redis.call('HGET', KEYS[2], hold)
  if holder and holds(holder, hold, tonumber(ARGV[4])) then return 0 end
  redis.call('HSET', KEYS[2], hold, id)
end
redis.call('ZREM', status_key(status), id)
redis.call('ZREM', KEYS[1], id)
redis.call('HDEL', jk, 'a', 'n', 'f', 'o', 'z', 'b', 'w', 'l', 'y')
redis.call('HSET', jk, 's', 'queued')
redis.call('ZADD', ready_key(queue), fifo_score(f[3], f[4]), id)
emit(id, 'queued', f[6], queue, f[7])
if f[8] then unsettle_member(f[8], id, status) end
trim_events()
redis.call('PUBLISH', ARGV[3], queue)
return 1
