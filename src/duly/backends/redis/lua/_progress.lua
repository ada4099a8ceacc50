-- _progress.lua: a running job's progress and checkpoint (duly.backends.progress), stored by
-- heartbeat.lua in the same call as the leases.
--@include _jobs
--@include _events
--
-- Job hash fields: `pr` the last progress (JSON {"fraction", "message", "at"}), `cu` the last
-- checkpoint (JSON; what the next run resumes from). A report applies only to a job `running`
-- under the reporting worker; '' leaves a value as stored. A new progress emits a `progress`
-- event (emit_progress, _events.lua).
local function store_progress(worker, id, progress, cursor)
  local jk = job_key(id)
  local f = redis.call('HMGET', jk, 's', 'w', 't', 'q', 'k')
  if f[1] ~= 'running' or f[2] ~= worker then return end
  if progress ~= '' then
    redis.call('HSET', jk, 'pr', progress)
    emit_progress(id, progress, f[3], f[4], f[5])
  end
  if cursor ~= '' then redis.call('HSET', jk, 'cu', cursor) end
end
