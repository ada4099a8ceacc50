-- enqueue.lua: store a batch of new jobs (one chunk of an enqueue call).
--
-- KEYS[1] due zset        KEYS[2] all-jobs index   KEYS[3] queues set   KEYS[4] queue counts
-- ARGV[1] prefix          ARGV[2] wake channel
-- ARGV[3..] nine per job: id, task, queue, payload, max_attempts, key ('' = none), priority,
--           enqueued_at, scheduled_for
-- Returns one integer per job, in order: 0 stored, 1 an id that already exists (deduplicated;
-- the stored job is left untouched).
--
-- A job with scheduled_for > enqueued_at becomes `scheduled` (in `due`, scored by
-- scheduled_for); any other becomes `queued` (in its ready zset). Each job joins `all` and, with
-- a key, its key index. One PUBLISH per queue that got a ready job wakes idle workers.
local out = {}
local ready = {}      -- queue -> {score, id, score, id, ...}
local all = {}
local queues = {}
local counts = {}
local n = 0
for i = 3, #ARGV, 9 do
  local id = ARGV[i]
  local jk = job_key(id)
  n = n + 1
  if redis.call('EXISTS', jk) == 1 then
    out[n] = 1
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
    all[#all + 1] = 0
    all[#all + 1] = id
    queues[queue] = true
    out[n] = 0
  end
end
if #all > 0 then
  redis.call('ZADD', KEYS[2], unpack(all))
  for queue in pairs(queues) do redis.call('SADD', KEYS[3], queue) end
  for queue, batch in pairs(ready) do redis.call('ZADD', ready_key(queue), unpack(batch)) end
  flush_counts(KEYS[4], counts)
  publish_all(ARGV[2], ready)
end
return out
