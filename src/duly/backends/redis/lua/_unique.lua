-- _unique.lua: unique holds (keys.py, "Unique holds"). `unique_hash` is the `u` hash.
--@include _jobs
local ACTIVE = {scheduled = true, queued = true, running = true, retrying = true}

-- Whether job `id` holds unique key `key` at time `at` (a number).
local function holds(id, key, at)
  local f = redis.call('HMGET', job_key(id), 's', 'u', 'ux')
  return ACTIVE[f[1]] == true and f[2] == key and (not f[3] or tonumber(f[3]) > at)
end

-- Whether a hold expiring at `expires` (a job's `ux`, false if none) has ended by `now`.
local function hold_expired(expires, now)
  return expires and tonumber(expires) <= tonumber(now)
end

-- Ends job `id`'s hold on `key`: u[key] goes if it still names the job. The job's `u` field
-- stays only if `keep` (the hold lasted until the job finished) and the job still held the key.
local function end_hold(unique_hash, id, key, keep)
  local held = redis.call('HGET', unique_hash, key) == id
  if held then redis.call('HDEL', unique_hash, key) end
  if not (held and keep) then redis.call('HDEL', job_key(id), 'u') end
end

