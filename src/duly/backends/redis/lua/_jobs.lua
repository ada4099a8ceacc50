-- _jobs.lua: the helpers every job script builds on (an include: see _scripts.py; a script
-- names its includes in `--@include` lines and carries only the definitions it uses).
--
-- Every script receives the namespace prefix "{<ns>}:" as ARGV[1]. The key builders below
-- mirror duly/backends/redis/_keys.py (Keyspace.job, .ready, .key_index, .status_index), which
-- documents the whole keyspace and the invariants.
local PREFIX = ARGV[1]

local function job_key(id) return PREFIX .. 'j:' .. id end
local function ready_key(queue) return PREFIX .. 'q:' .. queue end
local function key_index(key) return PREFIX .. 'k:' .. key end
local function status_key(status) return PREFIX .. 's:' .. status end

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
