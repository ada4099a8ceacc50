-- enqueue_after.lua: store a batch of jobs some of which wait for others (PRODUCT §16).
--
-- KEYS[1] due zset   KEYS[2] all-jobs index   KEYS[3] queues set   KEYS[4] queue counts
-- KEYS[5] unique holds hash (`u`)
-- ARGV[1] prefix   ARGV[2] wake channel   ARGV[3] retention (s) of a dependent cancelled by a
-- dependency   ARGV[4] now   ARGV[5] the deepest a dependent may be (MAX_DEPTH)
-- ARGV[6..] per job: id, task, queue, max_attempts, key ('' = none), priority, enqueued_at,
--   scheduled_for, payload, unique_key ('' = none), unique_until ('start'|'finish'),
--   unique_expires_at ('' = never), gate ('' = none), gate_limit, pipe_from ('' = none),
--   expires_at ('' = never; field X, as enqueue.lua stores it), n,
--   then the n ids it waits for (n = 0: an ordinary job).
-- Returns {'?', id} if a job waits for an id neither stored nor earlier in the batch, {'!', id,
-- depth} if a job would be deeper than ARGV[5] (nothing is stored in either case); else one value per job: '' stored, or the id it deduplicated to (its own, stored
-- already and left alone; or the job holding its unique key).
--
-- Every job is stored as enqueue.lua stores one (same fields and indexes; no hand-off). A job
-- with dependencies (_dependencies.lua) links itself in da:<dependency> (marking that job `dh`)
-- and gets `ah` = its depth (1 + the deepest of its dependencies, 1 for a job without `ah`),
-- `aw` = its dependencies not succeeded yet, `ap`, `ar`, and `ai` if its pipe_from
-- dependency succeeded already. It emits `scheduled`, then: none waiting -> `queued` now; a
-- dependency failed or cancelled already -> `cancelled` (dependency_cancel); else it waits,
-- `scheduled` with no due time.
--@include _jobs
--@include _unique
--@include _events
--@include _groups
--@include _dependencies
local now = ARGV[4]
local out = {}
local woken = {}
local counts = {}
local batch = {}
local max_depth = tonumber(ARGV[5])

-- Validate first: all or nothing. batch[id] = the depth of a job of the batch.
local at = 6
while at <= #ARGV do
  local n = tonumber(ARGV[at + 16])
  local depth = 1
  for j = 1, n do
    local dep = ARGV[at + 16 + j]
    local known = batch[dep] or 0
    local stored = redis.call('HMGET', job_key(dep), 's', 'ah')
    if stored[1] then known = math.max(known, tonumber(stored[2]) or 1) end
    if known == 0 then return {'?', dep} end
    depth = math.max(depth, known + 1)
  end
  if depth > max_depth then return {'!', ARGV[at], depth} end
  batch[ARGV[at]] = depth
  at = at + 17 + n
end

at = 6
while at <= #ARGV do
  local id, task, queue, max_attempts = ARGV[at], ARGV[at + 1], ARGV[at + 2], ARGV[at + 3]
  local key, priority, enqueued_at, scheduled_for = ARGV[at + 4], ARGV[at + 5], ARGV[at + 6],
    ARGV[at + 7]
  local unique, gate, pipe = ARGV[at + 9], ARGV[at + 12], ARGV[at + 14]
  local n = tonumber(ARGV[at + 16])
  local jk = job_key(id)
  local holder = unique ~= '' and redis.call('HGET', KEYS[5], unique)
  if redis.call('EXISTS', jk) == 1 then
    out[#out + 1] = id
  elseif holder and holds(holder, unique, tonumber(enqueued_at)) then
    out[#out + 1] = holder
  else
    out[#out + 1] = ''
    local scheduled = n > 0 or tonumber(scheduled_for) > tonumber(enqueued_at)
    local status = scheduled and 'scheduled' or 'queued'
    local fields = {'t', task, 'q', queue, 'p', ARGV[at + 8], 's', status, 'e', enqueued_at}
    if max_attempts ~= DEFAULT_MAX_ATTEMPTS then
      fields[#fields + 1], fields[#fields + 2] = 'm', max_attempts
    end
    if scheduled and n == 0 then fields[#fields + 1], fields[#fields + 2] = 'd', scheduled_for end
    if priority ~= '0' then fields[#fields + 1], fields[#fields + 2] = 'r', priority end
    if key ~= '' then fields[#fields + 1], fields[#fields + 2] = 'k', key end
    if unique ~= '' then
      fields[#fields + 1], fields[#fields + 2] = 'u', unique
      if ARGV[at + 10] == 'start' then fields[#fields + 1], fields[#fields + 2] = 'U', '1' end
      if ARGV[at + 11] ~= '' then fields[#fields + 1], fields[#fields + 2] = 'ux', ARGV[at + 11] end
      redis.call('HSET', KEYS[5], unique, id)
    end
    if gate ~= '' then
      fields[#fields + 1], fields[#fields + 2] = 'g', gate
      fields[#fields + 1], fields[#fields + 2] = 'G', ARGV[at + 13]
    end
    if ARGV[at + 15] ~= '' then fields[#fields + 1], fields[#fields + 2] = 'X', ARGV[at + 15] end
    redis.call('HSET', jk, unpack(fields))
    redis.call('ZADD', KEYS[2], 0, id)
    redis.call('SADD', KEYS[3], queue)
    if key ~= '' then redis.call('ZADD', key_index(key), 0, id) end
    emit(id, status, task, queue, key)
    if n == 0 and scheduled then
      redis.call('ZADD', KEYS[1], scheduled_for, id)
      bump(counts, queue .. SEP .. 's', 1)
    elseif n == 0 then
      redis.call('ZADD', ready_key(queue), fifo_score(priority, enqueued_at), id)
      woken[queue] = true
    else
      local waiting, cause, cause_task, cause_how = 0, nil, nil, nil
      local seen = {}
      for j = 1, n do
        local dep = ARGV[at + 16 + j]
        if not seen[dep] then
          seen[dep] = true
          redis.call('SADD', dependents_key(dep), id)
          redis.call('HSET', job_key(dep), 'dh', '1')
          local d = redis.call('HMGET', job_key(dep), 's', 't', 'o')
          if d[1] ~= 'succeeded' then waiting = waiting + 1 end
          if (d[1] == 'failed' or d[1] == 'cancelled') and (not cause or dep < cause) then
            cause, cause_task, cause_how = dep, d[2], d[1]
          end
          if dep == pipe and d[1] == 'succeeded' and d[3] then
            redis.call('HSET', jk, 'ai', d[3])
          end
        end
      end
      redis.call('HSET', jk, 'aw', waiting, 'ar', ARGV[3], 'ah', batch[id])
      if pipe ~= '' then redis.call('HSET', jk, 'ap', pipe) end
      if waiting == 0 then
        redis.call('HSET', jk, 's', 'queued', 'd', now)
        redis.call('ZADD', ready_key(queue), fifo_score(priority, enqueued_at), id)
        woken[queue] = true
        emit(id, 'queued', task, queue, key)
      elseif cause then
        dependency_cancel(id, dependent_fields(id), cause, cause_task, cause_how, now, false,
          woken)
      else
        bump(counts, queue .. SEP .. 's', 1)
      end
    end
  end
  at = at + 17 + n
end
trim_events()
flush_counts(KEYS[4], counts)
publish_all(ARGV[2], woken)
return out
