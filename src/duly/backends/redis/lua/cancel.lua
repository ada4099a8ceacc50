-- cancel.lua: cancel one scheduled, queued, retrying or running job.
--
-- KEYS[1] running zset   KEYS[2] due zset   KEYS[3] expiry zset   KEYS[4] queue counts
-- ARGV[1] prefix   ARGV[2] job id   ARGV[3] now   ARGV[4] expire_at ('' = never)
-- Returns 1 if cancelled, 0 if the job is finished or unknown.
--
-- The job leaves whichever active index holds it (`due`, its ready zset, or `run`) and becomes
-- `cancelled` with finished_at = now, in s:cancelled and `exp`. A running job keeps its worker
-- field but has left `run`, so its worker's next heartbeat reports it gone and its outcome is
-- dropped by finish.lua.
local id = ARGV[2]
local jk = job_key(id)
local f = redis.call('HMGET', jk, 's', 'q')
local status, queue = f[1], f[2]
if status == 'scheduled' or status == 'retrying' then
  redis.call('ZREM', KEYS[2], id)
  redis.call('HINCRBY', KEYS[4], queue .. SEP .. 's', -1)
elseif status == 'queued' then
  redis.call('ZREM', ready_key(queue), id)
elseif status == 'running' then
  redis.call('ZREM', KEYS[1], id)
  redis.call('HINCRBY', KEYS[4], queue .. SEP .. 'r', -1)
else
  return 0
end
redis.call('HSET', jk, 's', 'cancelled', 'f', ARGV[3])
redis.call('HDEL', jk, 'l')
redis.call('ZADD', status_key('cancelled'), 0, id)
if ARGV[4] ~= '' then
  redis.call('HSET', jk, 'z', ARGV[4])
  redis.call('ZADD', KEYS[3], ARGV[4], id)
end
return 1
