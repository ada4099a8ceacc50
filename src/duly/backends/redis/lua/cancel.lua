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
--@include _jobs
--@include _unique
--@include _concurrency
--@include _events
--@include _groups
--@include _freshness
--@include _dependencies
local id = ARGV[2]
local jk = job_key(id)
local f = redis.call('HMGET', jk, 's', 'q', 'g', 'u', 'ux', 't', 'k', 'gp', 'dh')
local status, queue, gate = f[1], f[2], f[3]
local counts = {}
local woken = {}
if status == 'scheduled' or status == 'retrying' then
  redis.call('ZREM', KEYS[2], id)
  bump(counts, queue .. SEP .. 's', -1)
elseif status == 'queued' and redis.call('ZREM', ready_key(queue), id) == 1 then
  -- A gated job in its ready zset may be the one a freed slot unparked: its turn passes on to
  -- the next parked job, else that one could wait with the slot free (a spare unpark only
  -- parks again at the next claim).
  if gate then unpark(gate, counts, woken) end
elseif status == 'queued' then
  redis.call('ZREM', gate_parked_key(gate), id)
  bump(counts, queue .. SEP .. 'w', -1)
elseif status == 'running' then
  redis.call('HSET', jk, 'c', ARGV[4])
  return 1
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
if f[4] then end_hold(KEYS[5], id, f[4], not hold_expired(f[5], ARGV[3])) end
emit(id, 'cancelled', f[6], queue, f[7])
if f[8] then settle_member(f[8], id, 'cancelled', ARGV[3], woken) end
if f[9] then dependency_ended(id, f[6], 'cancelled', ARGV[3], woken) end
trim_events()
fresh_ended(id, 'cancelled', ARGV[3], '') -- a freshness scope's sync (_freshness.lua)
flush_counts(KEYS[4], counts)
publish_all(ARGV[5], woken)
return 1
