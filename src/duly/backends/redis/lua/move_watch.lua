-- move_watch.lua: move the next run of the active job holding a unique key (a watch's next
-- check, backends/watches.py).
--
-- KEYS[1] due zset   KEYS[2] queue counts   KEYS[3] unique holds hash (`u`)
-- ARGV[1] prefix   ARGV[2] unique key   ARGV[3] run_at   ARGV[4] now
-- Returns false when no active job holds the key; else {id, 1} moved, or {id, 0} not moved
-- (it runs, or it is queued but not in its ready zset: parked behind its gate).
--
-- A `scheduled` or `retrying` holder gets d = run_at (its `due` score too); a `queued` one
-- leaves its ready zset and becomes `scheduled` for run_at (in `due`, counted, its event),
-- unless run_at <= now (due already: left queued).
--@include _jobs
--@include _unique
--@include _events
local key, run_at, now = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local id = redis.call('HGET', KEYS[3], key)
if not id or not holds(id, key, now) then return false end
local jk = job_key(id)
local f = redis.call('HMGET', jk, 's', 'q', 't', 'k')
local status, queue = f[1], f[2]
if status == 'running' then return {id, 0} end
if status == 'queued' then
  if run_at <= now then return {id, 1} end
  if redis.call('ZREM', ready_key(queue), id) == 0 then return {id, 0} end
  redis.call('HSET', jk, 's', 'scheduled')
  redis.call('HINCRBY', KEYS[2], queue .. SEP .. 's', 1)
  emit(id, 'scheduled', f[3], queue, f[4])
  trim_events()
end
redis.call('HSET', jk, 'd', ARGV[3])
redis.call('ZADD', KEYS[1], ARGV[3], id)
return {id, 1}
