-- retry.lua: re-queue one failed or cancelled job with fresh attempts.
--
-- KEYS[1] expiry zset
-- ARGV[1] prefix   ARGV[2] job id   ARGV[3] wake channel
-- Returns 1 if re-queued, 0 if the job is in another state or unknown.
--
-- The job leaves s:<status> and `exp`; becomes `queued` at its FIFO place (by enqueued_at) with
-- attempts and lost reset to 0; finished_at, result, expire_at, started_at, worker and lease are
-- removed; the error history (x) is kept. Its queue is woken.
local id = ARGV[2]
local jk = job_key(id)
local f = redis.call('HMGET', jk, 's', 'q', 'r', 'e')
local status, queue = f[1], f[2]
if status ~= 'failed' and status ~= 'cancelled' then return 0 end
redis.call('ZREM', status_key(status), id)
redis.call('ZREM', KEYS[1], id)
redis.call('HDEL', jk, 'a', 'n', 'f', 'o', 'z', 'b', 'w', 'l')
redis.call('HSET', jk, 's', 'queued')
redis.call('ZADD', ready_key(queue), fifo_score(f[3], f[4]), id)
redis.call('PUBLISH', ARGV[3], queue)
return 1
