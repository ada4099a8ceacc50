-- _operator.lua: cancelling and retrying one job (included by cancel.lua and retry.lua, which
-- act on one job, and by cancel_many.lua and retry_many.lua, which act on a batch in one
-- script). The caller trims the events, flushes `counts` and publishes `woken` once.
--@include _jobs
--@include _unique
--@include _concurrency
--@include _events
--@include _groups
--@include _freshness
--@include _dependencies
--
-- cancel_one: see cancel.lua. K = {running, due, expiry, queue counts, unique}; `only` = the
-- status the job must be in ('' = any active one). Returns 1 if cancelled (or, running,
-- requested), else 0.
local function cancel_one(K, id, now, expire_at, only, counts, woken)
  local jk = job_key(id)
  local f = redis.call('HMGET', jk, 's', 'q', 'g', 'u', 'ux', 't', 'k', 'gp', 'dh')
  local status, queue, gate = f[1], f[2], f[3]
  if only ~= '' and status ~= only then return 0 end
  if status == 'scheduled' or status == 'retrying' then
    redis.call('ZREM', K[2], id)
    bump(counts, queue .. SEP .. 's', -1)
  elseif status == 'queued' and redis.call('ZREM', ready_key(queue), id) == 1 then
    -- A gated job in its ready zset may be the one a freed slot unparked: its turn passes on
    -- to the next parked job, else that one could wait with the slot free (a spare unpark
    -- only parks again at the next claim).
    if gate then unpark(gate, counts, woken) end
  elseif status == 'queued' then
    redis.call('ZREM', gate_parked_key(gate), id)
    bump(counts, queue .. SEP .. 'w', -1)
  elseif status == 'running' then
    redis.call('HSET', jk, 'c', expire_at)
    return 1
  else
    return 0
  end
  redis.call('HSET', jk, 's', 'cancelled', 'f', now)
  redis.call('HDEL', jk, 'l')
  redis.call('ZADD', status_key('cancelled'), 0, id)
  if expire_at ~= '' then
    redis.call('HSET', jk, 'z', expire_at)
    redis.call('ZADD', K[3], expire_at, id)
  end
  if f[4] then end_hold(K[5], id, f[4], not hold_expired(f[5], now)) end
  emit(id, 'cancelled', f[6], queue, f[7])
  if f[8] then settle_member(f[8], id, 'cancelled', now, woken) end
  if f[9] then dependency_ended(id, f[6], 'cancelled', now, woken) end
  fresh_ended(id, 'cancelled', now, '') -- a freshness scope's sync (_freshness.lua)
  return 1
end

-- retry_one: see retry.lua. K = {expiry, unique}; `only` = 'failed', 'cancelled' or '' (either).
-- Returns 1 if re-queued (its queue added to `woken`), else 0.
local function retry_one(K, id, now, only, woken)
  local jk = job_key(id)
  local f = redis.call('HMGET', jk, 's', 'q', 'r', 'e', 'u', 't', 'k', 'gp', 'aw')
  local status, queue, hold = f[1], f[2], f[5]
  if status ~= 'failed' and status ~= 'cancelled' then return 0 end
  if only ~= '' and status ~= only then return 0 end
  -- A dependent cancelled by a dependency runs when that one succeeds, not on its own.
  if (tonumber(f[9]) or 0) > 0 then return 0 end
  if hold then
    local holder = redis.call('HGET', K[2], hold)
    if holder and holds(holder, hold, tonumber(now)) then return 0 end
    redis.call('HSET', K[2], hold, id)
  end
  redis.call('ZREM', status_key(status), id)
  redis.call('ZREM', K[1], id)
  redis.call('HDEL', jk, 'a', 'n', 'f', 'o', 'z', 'b', 'w', 'l', 'y', 'X')
  redis.call('HSET', jk, 's', 'queued')
  redis.call('ZADD', ready_key(queue), fifo_score(f[3], f[4]), id)
  emit(id, 'queued', f[6], queue, f[7])
  if f[8] then unsettle_member(f[8], id, status) end
  woken[queue] = true
  return 1
end
