-- _expiry.lua: ending a job that was still waiting at its expiry (field `X`, options(expires=)).
--@include _jobs
--@include _unique
--@include _concurrency
--@include _events
--@include _groups
--@include _freshness
--@include _dependencies
--
-- Job `id`, just popped from its ready zset by claim.lua (so in no index), ends as cancel.lua
-- ends a waiting job: `cancelled` at `now`, in s:cancelled and `exp` (expire_at = now +
-- EXPIRED_KEEP), a JobExpired entry appended to its errors (`x`); a gated job passes its turn
-- on to the next parked job of its gate (it may be the one a freed slot unparked); its unique
-- hold ends; its event, its group, its dependents, its freshness scope as for a cancel.
-- Returns its errors after the change (the claimer builds its record).
local EXPIRED_KEEP = 604800
local EXPIRED_CAP = 100  -- jobs one claim ends at most (claim.lua)
local SKIP_CAP = 1000  -- expired jobs past EXPIRED_CAP one claim puts back before it stops
local EXPIRED_MESSAGE = 'the job was not started by its expiry time (expires=): it never ran'

local function has_expired(expires_at, now)
  return expires_at and tonumber(expires_at) <= tonumber(now)
end

local function end_expired(unique_hash, id, now, counts, woken)
  local jk = job_key(id)
  local f = redis.call('HMGET', jk, 'q', 'g', 'u', 'ux', 't', 'k', 'gp', 'dh', 'x', 'a')
  local queue, gate = f[1], f[2]
  if gate then unpark(gate, counts, woken) end
  local entry = cjson.encode({type = 'JobExpired', message = EXPIRED_MESSAGE, traceback = '',
    at = tonumber(now), attempt = tonumber(f[10]) or 0})
  local errors = f[9]
  if errors and string.sub(errors, -1) == ']' and string.find(errors, '{', 1, true) then
    errors = string.sub(errors, 1, -2) .. ',' .. entry .. ']'
  else
    errors = '[' .. entry .. ']'
  end
  local expire_at = tonumber(now) + EXPIRED_KEEP
  redis.call('HSET', jk, 's', 'cancelled', 'f', now, 'x', errors, 'z', expire_at)
  redis.call('HDEL', jk, 'l')
  redis.call('ZADD', status_key('cancelled'), 0, id)
  redis.call('ZADD', PREFIX .. 'exp', expire_at, id)
  if f[3] then end_hold(unique_hash, id, f[3], not hold_expired(f[4], now)) end
  emit(id, 'cancelled', f[5], queue, f[6])
  if f[7] then settle_member(f[7], id, 'cancelled', now, woken) end
  if f[8] then dependency_ended(id, f[5], 'cancelled', now, woken) end
  fresh_ended(id, 'cancelled', now, '')
  return errors
end
