-- enqueue.lua: store a batch of new jobs (one chunk of an enqueue call).
--
-- KEYS[1] due zset        KEYS[2] all-jobs index   KEYS[3] queues set   KEYS[4] queue counts
-- KEYS[5] unique holds hash (`u`)
-- ARGV[1] prefix          ARGV[2] wake channel
-- ARGV[3..] per job: id, task, queue, payload, max_attempts, key ('' = none), priority,
--           enqueued_at, scheduled_for, then a concurrency marker: '' for a plain job, or 'c'
--           followed by five more: unique_key ('' = none), unique_until ('start'|'finish'),
--           unique_expires_at ('' = never), gate ('' = none), gate_limit
-- Returns one value per job, in order: 0 stored, or the id of the job it deduplicated to (its
-- own id if that id already exists, untouched; or the job holding its unique key).
--
-- A job with scheduled_for > enqueued_at becomes `scheduled` (in `due`, scored by
-- scheduled_for); any other becomes `queued` (in its ready zset). Each job joins `all` and, with
-- a key, its key index. One PUBLISH per queue that got a ready job wakes idle workers.
-- A unique key held by an active job (keys.py, "Unique holds"; expiry compared with this job's
-- enqueued_at) deduplicates the job; else the job takes the key (u[key] = id, job fields u, U,
-- ux), so a later duplicate in the same batch resolves to it. A gate is just stored (g, G):
-- claim.lua applies it.
local out = {}
local ready = {}      -- queue -> {score, id, score, id, ...}
local all = {}
local queues = {}
local counts = {}

-- Stores the concurrency fields of the job at ARGV[i] (marker 'c') and takes its unique key.
local function store_concurrency(jk, id, i)
  local unique, gate = ARGV[i + 10], ARGV[i + 13]
  local fields = {}
  if unique ~= '' then
    fields[#fields + 1], fields[#fields + 2] = 'u', unique
    if ARGV[i + 11] == 'start' then fields[#fields + 1], fields[#fields + 2] = 'U', '1' end
    if ARGV[i + 12] ~= '' then fields[#fields + 1], fields[#fields + 2] = 'ux', ARGV[i + 12] end
    redis.call('HSET', KEYS[5], unique, id)
  end
  if gate ~= '' then
    fields[#fields + 1], fields[#fields + 2] = 'g', gate
    fields[#fields + 1], fields[#fields + 2] = 'G', ARGV[i + 14]
  end
  redis.call('HSET', jk, unpack(fields))
end

local n = 0
local i = 3
while i <= #ARGV do
  local id = ARGV[i]
  local jk = job_key(id)
  local plain = ARGV[i + 9] == ''
  local unique = not plain and ARGV[i + 10]
  local holder = unique and unique ~= '' and redis.call('HGET', KEYS[5], unique)
  n = n + 1
  if redis.call('EXISTS', jk) == 1 then
    out[n] = id
  elseif holder and holds(holder, unique, tonumber(ARGV[i + 7])) then
    out[n] = holder
  else
    local queue, key, priority = ARGV[i + 2], ARGV[i + 5], ARGV[i + 6]
    local enqueued_at, scheduled_for = ARGV[i + 7], ARGV[i + 8]
    if tonumber(scheduled_for) > tonumber(enqueued_at) then
      redis.call('HSET', jk, 't', ARGV[i + 1], 'q', queue, 'p', ARGV[i + 3], 's', 'scheduled',
        'm', ARGV[i + 4], 'r', priority, 'e', enqueued_at, 'd', scheduled_for)
      redis.call('ZADD', KEYS[1], scheduled_for, id)
      bump(counts, queue .. SEP .. 's', 1)
    else
      redis.call('HSET', jk, 't', ARGV[i + 1], 'q', queue, 'p', ARGV[i + 3], 's', 'queued',
        'm', ARGV[i + 4], 'r', priority, 'e', enqueued_at)
      local batch = ready[queue]
      if batch == nil then batch = {}; ready[queue] = batch end
      batch[#batch + 1] = fifo_score(priority, enqueued_at)
      batch[#batch + 1] = id
    end
    if key ~= '' then
      redis.call('HSET', jk, 'k', key)
      redis.call('ZADD', key_index(key), 0, id)
    end
    if not plain then store_concurrency(jk, id, i) end
    all[#all + 1] = 0
    all[#all + 1] = id
    queues[queue] = true
    out[n] = 0
  end
  i = i + (plain and 10 or 15)
end
if #all > 0 then
  redis.call('ZADD', KEYS[2], unpack(all))
  for queue in pairs(queues) do redis.call('SADD', KEYS[3], queue) end
  for queue, batch in pairs(ready) do redis.call('ZADD', ready_key(queue), unpack(batch)) end
  flush_counts(KEYS[4], counts)
  publish_all(ARGV[2], ready)
end
return out
