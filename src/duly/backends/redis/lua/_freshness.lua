-- _freshness.lua: freshness helpers (PRODUCT §7), included by the scripts that store a sync or
-- end one (freshness.lua; finish, recover and cancel through fresh_ended).
--@include _jobs
--@include _events
--
-- Keys (keys.py, "Freshness"): f:<member> hash per
-- scope, member = name SEP scope; fd:<name> zset of a freshness's scopes by next_due (the
-- baseline/backoff due index); fs:<name> zset of a freshness's scopes by stale_at (last_success +
-- max_staleness; NEVER for a scope never synced). A sync job carries its scope's member in
-- its field `fs`. The rules mirror duly/freshness_state.py.
local FRESH_NEVER = -1e18
local FRESH_BACKOFF_BASE = 1.0

local function fresh_key(member) return PREFIX .. 'f:' .. member end
local function fresh_index(name) return PREFIX .. 'fs:' .. name end
local function fresh_due_key(name) return PREFIX .. 'fd:' .. name end

-- The first baseline time after `now`: offset plus a multiple of full_every.
local function fresh_next_baseline(now, offset, full_every)
  return offset + (math.floor((now - offset) / full_every) + 1) * full_every
end

-- Seconds to wait after `failures` consecutive failures (freshness_state.backoff).
local function fresh_backoff(failures, max_backoff, jitter)
  local raw = math.min(max_backoff, FRESH_BACKOFF_BASE * 2 ^ math.min(failures - 1, 60))
  return raw * (0.5 + 0.5 * jitter)
end

-- "<type>: <message>" of the last entry of an errors JSON list ('' when none or unreadable).
local function fresh_error(errors)
  if not errors or errors == '' then return '' end
  local ok, list = pcall(cjson.decode, errors)
  if not ok or type(list) ~= 'table' or #list == 0 or type(list[#list]) ~= 'table' then
    return ''
  end
  local last = list[#list]
  return tostring(last.type or 'Error') .. ': ' .. tostring(last.message or '')
end

-- Stores scope `member`'s sync job `id`, `queued` at `now` with `priority` (0 = none stored) in
-- its ready zset and the all-jobs index `all_key` (and its key index with a key), its queue in
-- the queues set `queues_key` and in `woken`, and emits its `queued` event (the same event an
-- enqueue emits; the script writes it with trim_events).
local function fresh_store_sync(all_key, queues_key, id, task, queue, max_attempts, key,
                                priority, payload, member, now, woken)
  local jk = job_key(id)
  redis.call('HSET', jk, 't', task, 'q', queue, 'p', payload, 's', 'queued',
    'm', max_attempts, 'e', now, 'fs', member)
  if priority ~= 0 then redis.call('HSET', jk, 'r', priority) end
  if key ~= '' then
    redis.call('HSET', jk, 'k', key)
    redis.call('ZADD', key_index(key), 0, id)
  end
  redis.call('ZADD', ready_key(queue), fifo_score(priority, now), id)
  redis.call('ZADD', all_key, 0, id)
  redis.call('SADD', queues_key, queue)
  woken[queue] = true
  emit(id, 'queued', task, queue, key)
end

-- Job `id` (a scope's sync, if it has an `fs` field) reached `status` (succeeded | failed |
-- retrying | cancelled; anything else changes nothing) at `now`; `errors` its errors JSON
-- ('' = none). Only the scope's current sync (its `j`) updates it. A success stores the
-- follow-up a touch queued while it ran (fields fu, fp, fr: its id, delta payload and
-- priority; PRODUCT §17) as the scope's sync, its queue in `woken` (given by finish, the only
-- caller that records successes); a failure for good or a cancel drops it.
local function fresh_ended(id, status, now, errors, woken)
  local jk = job_key(id)
  local member = redis.call('HGET', jk, 'fs')
  if not member then return end
  local fk = fresh_key(member)
  local f = redis.call('HMGET', fk, 'j', 'mb', 'jt', 'of', 'fe', 'ms', 'fu', 'fp', 'fr')
  if f[1] ~= id then return end
  local now_n = tonumber(now)
  local started = redis.call('HGET', jk, 'b')
  if started then redis.call('HSET', fk, 'la', started) end
  local sep = string.find(member, SEP, 1, true)
  local name, scope = string.sub(member, 1, sep - 1), string.sub(member, sep + 1)
  if status == 'succeeded' then
    local ls = started or now
    local nd = fresh_next_baseline(now_n, tonumber(f[4]), tonumber(f[5]))
    redis.call('HSET', fk, 'ls', ls, 'nf', 0, 'nd', nd)
    redis.call('HDEL', fk, 'le', 'j')
    if f[7] then
      local t = redis.call('HMGET', jk, 't', 'q', 'm', 'k')
      fresh_store_sync(PREFIX .. 'all', PREFIX .. 'queues', f[7], t[1], t[2], t[3], t[4] or '',
        tonumber(f[9]) or 0, f[8], member, now, woken or {})
      redis.call('HSET', fk, 'j', f[7], 'rb', 'touch')
      redis.call('HDEL', fk, 'fu', 'fp', 'fr')
    end
    redis.call('ZADD', fresh_due_key(name), nd, scope)
    redis.call('ZADD', fresh_index(name), tonumber(ls) + tonumber(f[6]), scope)
  elseif status == 'failed' or status == 'retrying' then
    local failures = redis.call('HINCRBY', fk, 'nf', 1)
    local text = fresh_error(errors)
    if text ~= '' then redis.call('HSET', fk, 'le', text) end
    if status == 'failed' then
      local nd = now_n + fresh_backoff(failures, tonumber(f[2]), tonumber(f[3]))
      redis.call('HSET', fk, 'nd', nd)
      redis.call('HDEL', fk, 'j', 'fu', 'fp', 'fr')
      redis.call('ZADD', fresh_due_key(name), nd, scope)
    end
  elseif status == 'cancelled' then
    redis.call('HSET', fk, 'le', 'cancelled')
    redis.call('HDEL', fk, 'j', 'fu', 'fp', 'fr')
  end
end
