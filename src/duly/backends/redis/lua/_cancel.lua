-- _cancel.lua: ending a running job whose cancel was requested (cancel.lua sets the request;
-- finish.lua and recover.lua apply it).
--@include _jobs
--@include _unique
--@include _concurrency
--@include _events
--@include _groups
--@include _dependencies
--
-- A running job whose cancel was requested (its `c` field = the expire_at it gets, '' = none;
-- see cancel.lua) ends `cancelled` at `now`, whatever its run did: it leaves `run` (`run_key`),
-- loses its lease, rate slot and request, joins s:cancelled and (with an expire_at) `exp_key`;
-- its unique hold ends (`unique` = its `u` field) and its gate slot frees.
local function end_cancelled(run_key, exp_key, unique_hash, id, queue, gate, unique, expire_at,
                             now, counts, woken)
  local jk = job_key(id)
  redis.call('ZREM', run_key, id)
  bump(counts, queue .. SEP .. 'r', -1)
  redis.call('HSET', jk, 's', 'cancelled', 'f', now)
  redis.call('HDEL', jk, 'l', 'y', 'c')
  redis.call('ZADD', status_key('cancelled'), 0, id)
  if expire_at ~= '' then
    redis.call('HSET', jk, 'z', expire_at)
    redis.call('ZADD', exp_key, expire_at, id)
  end
  if unique then
    end_hold(unique_hash, id, unique, not hold_expired(redis.call('HGET', jk, 'ux'), now))
  end
  if gate then free_gate(gate, id, counts, woken) end
  local f = redis.call('HMGET', jk, 't', 'k', 'gp', 'dh')
  emit(id, 'cancelled', f[1], queue, f[2])
  if f[3] then settle_member(f[3], id, 'cancelled', now, woken) end
  if f[4] then dependency_ended(id, f[1], 'cancelled', now, woken) end
end
