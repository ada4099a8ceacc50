-- _common.lua: helpers prepended to every script by scripts.py; not a script of its own.
--
-- Every script receives the namespace prefix "{<ns>}:" as ARGV[1]. The key builders below
-- mirror duly/backends/redis/keys.py (Keyspace.job, .ready, .key_index, .status_index,
-- .gate_running, .gate_parked, .rate), which documents the whole keyspace and the invariants.
local PREFIX = ARGV[1]

local function job_key(id) return PREFIX .. 'j:' .. id end
local function ready_key(queue) return PREFIX .. 'q:' .. queue end
local function key_index(key) return PREFIX .. 'k:' .. key end
local function status_key(status) return PREFIX .. 's:' .. status end
local function gate_running_key(gate) return PREFIX .. 'gr:' .. gate end
local function gate_parked_key(gate) return PREFIX .. 'gw:' .. gate end
local function rate_key(key) return PREFIX .. 'rl:' .. key end

-- A job hash without `m` has this max_attempts (keys.py DEFAULT_MAX_ATTEMPTS).
local DEFAULT_MAX_ATTEMPTS = '4'

-- Ready-queue score: -priority * 2^42 + ms (priority clamped to -1000..1000, ms to 0..2^42-1).
-- ms = enqueued_at in milliseconds, or 0 for a job handed back to the head of its priority.
local SPAN = 4398046511104 -- 2^42
local function ready_score(priority, ms)
  local p = tonumber(priority) or 0
  if p > 1000 then p = 1000 elseif p < -1000 then p = -1000 end
  p = math.floor(p)
  ms = math.floor(ms)
  if ms < 0 then ms = 0 elseif ms >= SPAN then ms = SPAN - 1 end
  return -p * SPAN + ms
end

-- FIFO score of a job hash's own enqueued_at (e), as stored.
local function fifo_score(priority, enqueued_at)
  return ready_score(priority, (tonumber(enqueued_at) or 0) * 1000)
end

-- Adds n to counts[field] (a Lua table later flushed with HINCRBY, one call per field).
local function bump(counts, field, n)
  counts[field] = (counts[field] or 0) + n
end

local function flush_counts(hash_key, counts)
  for field, n in pairs(counts) do
    if n ~= 0 then redis.call('HINCRBY', hash_key, field, n) end
  end
end

local function publish_all(channel, queues)
  for queue in pairs(queues) do redis.call('PUBLISH', channel, queue) end
end

-- ZADD / ZREM of many members at once (unpack in slices: Lua's C stack holds ~8000 values).
local SLICE = 1000
local function zadd_many(key, score_ids)
  for i = 1, #score_ids, SLICE do
    redis.call('ZADD', key, unpack(score_ids, i, math.min(i + SLICE - 1, #score_ids)))
  end
end
local function zrem_many(key, ids)
  for i = 1, #ids, SLICE do
    redis.call('ZREM', key, unpack(ids, i, math.min(i + SLICE - 1, #ids)))
  end
end

local SEP = '\31' -- unit separator between the parts of a hash field name

-- Unique holds (keys.py, "Unique holds"). `unique_hash` is the `u` hash.
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

-- Moves the best parked job of `gate` (if any) back to its ready zset with the score it was
-- parked with. Counts (the parked count of its queue) go to `counts`, its queue to `woken` (to
-- publish).
local function unpark(gate, counts, woken)
  local parked = redis.call('ZPOPMIN', gate_parked_key(gate))
  if #parked == 0 then return end
  local queue = redis.call('HGET', job_key(parked[1]), 'q')
  redis.call('ZADD', ready_key(queue), parked[2], parked[1])
  bump(counts, queue .. SEP .. 'w', -1)
  woken[queue] = true
end

-- Job `id` of `gate` left `running`: its slot frees, and the best parked job takes its turn.
local function free_gate(gate, id, counts, woken)
  redis.call('SREM', gate_running_key(gate), id)
  unpark(gate, counts, woken)
end

-- Events (keys.py, "Events"): every job state change is one event, numbered 1, 2, 3... across
-- the namespace (`ev:n` holds the last number). A script collects its events (emit) and writes
-- them at its end (trim_events): one `ev` stream entry per EVENTS_PER_ENTRY events, whose id is
-- 0-<number of its last event>, with fields n (how many; absent = 1, the one-call enqueue's
-- entry, 2 bytes less), a (server time, ms) and e (the events as one msgpack array: job id,
-- status code, task, queue, key or '' for each), so a burst of jobs costs one XADD per script call, not one per job. The status is
-- its code (STATUS_CODE: a one-byte integer instead of the name, ~6 bytes less per event). The
-- events of jobs with a key also go, per key, to ev:k:<key> under the same entry id (fields a,
-- e: number, job id, status code, task, queue for each), which lives KEY_EVENTS_TTL seconds
-- after its last entry. Retention: entries whose last event is below (last number -
-- EVENTS_KEPT) are trimmed (~: whole nodes), and purge trims by age; a reader compares its
-- position with the first event still stored. Entries written before (status names, `n`
-- always) read the same (streams.py).
local EVENTS_KEPT = 100000
local EVENTS_PER_ENTRY = 1000
local KEY_EVENTS_TTL = 604800
-- Mirrors records.STATUSES (1-based), read back by streams.py.
local STATUS_CODE = {scheduled = 1, queued = 2, running = 3, retrying = 4, succeeded = 5,
  failed = 6, cancelled = 7}
local pending_events = {}
local pending_count = 0
local pending_keyed = false
local function emit(id, status, task, queue, key)
  local e, b = pending_events, pending_count * 5
  pending_count = pending_count + 1
  if key and key ~= '' then pending_keyed = true else key = '' end
  e[b + 1], e[b + 2], e[b + 3], e[b + 4], e[b + 5] = id, STATUS_CODE[status], task, queue, key
end
local function trim_events()
  local e, count = pending_events, pending_count
  if count == 0 then return end
  local t = redis.call('TIME')
  local ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local last = redis.call('INCRBY', PREFIX .. 'ev:n', count)
  local number = last - count
  for first = 1, count, EVENTS_PER_ENTRY do
    local n = math.min(EVENTS_PER_ENTRY, count - first + 1)
    local entry, keyed = e, {}
    if count > EVENTS_PER_ENTRY then
      entry = {unpack(e, (first - 1) * 5 + 1, (first + n - 1) * 5)}
    end
    for x = first, pending_keyed and first + n - 1 or 0 do
      local b = (x - 1) * 5
      local key = e[b + 5]
      if key ~= '' then
        local k = keyed[key]
        if k == nil then k = {}; keyed[key] = k end
        k[#k + 1], k[#k + 2], k[#k + 3], k[#k + 4], k[#k + 5] =
          number + x - first + 1, e[b + 1], e[b + 2], e[b + 3], e[b + 4]
      end
    end
    number = number + n
    local eid = '0-' .. number
    if n == 1 then
      redis.call('XADD', PREFIX .. 'ev', eid, 'a', ms, 'e', cmsgpack.pack(entry))
    else
      redis.call('XADD', PREFIX .. 'ev', eid, 'n', n, 'a', ms, 'e', cmsgpack.pack(entry))
    end
    for key, k in pairs(keyed) do
      local kk = PREFIX .. 'ev:k:' .. key
      redis.call('XADD', kk, eid, 'a', ms, 'e', cmsgpack.pack(k))
      redis.call('EXPIRE', kk, KEY_EVENTS_TTL)
      if last > EVENTS_KEPT then
        redis.call('XTRIM', kk, 'MINID', '~', '0-' .. (last - EVENTS_KEPT))
      end
    end
  end
  if last > EVENTS_KEPT then
    redis.call('XTRIM', PREFIX .. 'ev', 'MINID', '~', '0-' .. (last - EVENTS_KEPT))
  end
  pending_events, pending_count, pending_keyed = {}, 0, false
end

-- Groups (keys.py, "Groups"): g:<id> hash {n total, left, succeeded, failed, cancelled, at
-- created, ret retention s, k key, cb '1' with a callback, done completed_at}; gs:<id> the set
-- of members whose outcome was counted. A member job's `gp` field names its group.
local function group_key(id) return PREFIX .. 'g:' .. id end
local function group_settled_key(id) return PREFIX .. 'gs:' .. id end

-- Member `id` of `group` reached `status` (succeeded, failed or cancelled) at `now`. Only its
-- first outcome counts (SADD); the one that leaves none pending completes the group (done =
-- now, kept `ret` seconds more) and makes its callback job (id = the group's) `queued` at its
-- FIFO place, its queue woken (`woken`). A member of a group already deleted counts nowhere.
local function settle_member(group, id, status, now, woken)
  local gk = group_key(group)
  -- A group past its retention is gone: a member outliving it (a later retry) counts nowhere.
  if redis.call('EXISTS', gk) == 0 then return end
  if redis.call('SADD', group_settled_key(group), id) == 0 then return end
  redis.call('HINCRBY', gk, status, 1)
  if redis.call('HINCRBY', gk, 'left', -1) > 0 then return end
  redis.call('HSET', gk, 'done', now)
  local f = redis.call('HMGET', gk, 'ret', 'cb')
  local ttl = math.ceil(tonumber(f[1]) or 86400)
  redis.call('EXPIRE', gk, ttl)
  redis.call('EXPIRE', group_settled_key(group), ttl)
  if not f[2] then return end
  local cj = job_key(group)
  local c = redis.call('HMGET', cj, 's', 'd', 'q', 'r', 'e', 't', 'k')
  if c[1] == 'scheduled' and not c[2] then
    redis.call('HSET', cj, 's', 'queued', 'd', now)
    redis.call('ZADD', ready_key(c[3]), fifo_score(c[4], c[5]), group)
    redis.call('HINCRBY', PREFIX .. 'qc', c[3] .. SEP .. 's', -1)
    woken[c[3]] = true
    emit(group, 'queued', c[6], c[3], c[7])
  end
end

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
  local f = redis.call('HMGET', jk, 't', 'k', 'gp')
  emit(id, 'cancelled', f[1], queue, f[2])
  if f[3] then settle_member(f[3], id, 'cancelled', now, woken) end
end
