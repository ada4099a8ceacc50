-- heartbeat.lua: record a worker alive and extend the leases of its running jobs; store the
-- progress and checkpoints its runs reported (duly.backends.progress, _progress.lua).
--
-- KEYS[1] running zset   KEYS[2] workers zset
-- ARGV[1] prefix   ARGV[2] worker   ARGV[3] now   ARGV[4] lease_until   ARGV[5] R, the number
-- of reports   ARGV[6 .. 5 + 3R] per report: job id, progress ('' = unchanged), cursor (''
-- = unchanged)   ARGV[6 + 3R ..] job ids
-- Returns the ids the worker must stop: no longer running under it (recovered, gone), or
-- running with a cancel requested (field `c`, see cancel.lua).
--
-- Only a job whose hash says `running` under this worker gets the new lease, both in its hash
-- (l) and as its score in `run` (a job being cancelled too: it runs until its run ends); any
-- other id is reported and left untouched. A report applies under the same condition.
--@include _jobs
--@include _events
--@include _progress
local worker, lease_until = ARGV[2], ARGV[4]
redis.call('ZADD', KEYS[2], ARGV[3], worker)
local reports = tonumber(ARGV[5])
for i = 6, 5 + 3 * reports, 3 do
  store_progress(worker, ARGV[i], ARGV[i + 1], ARGV[i + 2])
end
local gone = {}
for i = 6 + 3 * reports, #ARGV do
  local id = ARGV[i]
  local jk = job_key(id)
  local f = redis.call('HMGET', jk, 's', 'w', 'c')
  if f[1] == 'running' and f[2] == worker then
    redis.call('HSET', jk, 'l', lease_until)
    redis.call('ZADD', KEYS[1], 'XX', lease_until, id)
    if f[3] then gone[#gone + 1] = id end
  else
    gone[#gone + 1] = id
  end
end
if reports > 0 then trim_events() end
return gone
