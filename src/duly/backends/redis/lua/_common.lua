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
end
