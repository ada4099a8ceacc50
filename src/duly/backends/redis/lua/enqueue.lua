-- enqueue.lua: store a batch of new jobs (one chunk of an enqueue call).
--
-- KEYS[1] due zset        KEYS[2] all-jobs index   KEYS[3] queues set   KEYS[4] queue counts
-- KEYS[5] unique holds hash (`u`)   KEYS[6] running zset
-- ARGV[1] prefix          ARGV[2] wake channel
-- ARGV[3] group id ('' = a plain enqueue, then the job groups start at ARGV[4]); with a group
--   id, ARGV[4] the group's key ('' = none), ARGV[5] created_at, ARGV[6] retention (s),
--   ARGV[7] its name ('' = none), and the job groups start at ARGV[8]. The whole group is
--   one chunk (one call: all or none).
-- ARGV[h..] groups of jobs that share every field but id and payload (a bulk enqueue of one
--   task is one group), each: n, task, queue, max_attempts, key ('' = none), priority,
--   enqueued_at, scheduled_for, then a concurrency marker: '' for plain jobs, or 'c' followed
--   by six more: unique_key ('' = none), unique_until ('start'|'finish'), unique_expires_at
--   ('' = never), gate ('' = none), gate_limit, expires_at ('' = never; field X, which
--   claim.lua checks), debounce ('1' = yes, ''); then n pairs: id, payload.
-- Debounce: a job whose unique key is held by a job still waiting (scheduled, or queued in its
-- ready zset or parked) makes that holder take its payload and scheduled_for, `scheduled` (in
-- `due`); a holder that was ready and gated passes its gate turn on (unpark). A running holder
-- is not touched. (A holder queued earlier in this chunk is not in its ready zset yet: claim.lua
-- drops its entry there as stale.)
-- Returns the deduplicated jobs only, as a flat list: position (1-based, over the whole chunk),
-- id of the job it deduplicated to (its own id if that id already exists, untouched; or the
-- job holding its unique key). An empty list: every job was stored. A named group whose name
-- a stored group has stores nothing and returns {0, that group's id, its member ids joined
-- by ','}.
--
-- A job with scheduled_for > enqueued_at becomes `scheduled` (in `due`, scored by
-- scheduled_for); any other becomes `queued` (in its ready zset). Each job joins `all` and, with
-- a key, its key index. One PUBLISH per queue that got a ready job wakes idle workers. The
-- priority field `r` is only stored when it is not 0, `m` when not DEFAULT_MAX_ATTEMPTS, `d`
-- when scheduled_for is not enqueued_at (a scheduled job, or a periodic tick enqueued after it).
-- A unique key held by an active job (keys.py, "Unique holds"; expiry compared with this job's
-- enqueued_at) deduplicates the job; else the job takes the key (u[key] = id, job fields u, U,
-- ux), so a later duplicate in the same batch resolves to it. A gate is just stored (g, G):
-- claim.lua applies it.
-- A duly group (ARGV[3]): each stored job whose id is not the group's is a member (field `gp`);
-- the job whose id is the group's is its callback, stored `scheduled` with no due time (in no
-- index a promotion or a claim reads) until settle_member queues it. The g:<id> hash is
-- stored last with the number of members stored (and a named group's name, member ids and
-- gn:<name> key). Each stored job emits its first event.
-- Hand-off (_handoff.lua): a plain job (no unique key, no gate, no expiry, not scheduled, not
-- in a duly group: a job with an expiry always passes through claim.lua's check) whose queue
-- has no ready job is claimed here for the newest idle worker registered on
-- that queue, if any (claim.lua's change: `running`, attempts 1, started_at = enqueued_at,
-- worker, the registration's lease_until, in `run`, counted, a `running` event after its
-- `queued` one), and its row pushed to that worker's inbox; its queue is not published for it.
-- A job of a paused queue (_pausing.lua) is never handed off: it waits, queued.
--@include _jobs
--@include _unique
--@include _events
--@include _groups
--@include _handoff
--@include _pausing
--@include _concurrency
local out = {}
local ready = {}      -- queue -> {score, id, score, id, ...}
local all = {}
local queues = {}
local counts = {}
local woken = {}

-- The waiting holder of a debounced key takes the new payload and due time (see the header).
local function debounce(id, payload, scheduled_for)
  local jk = job_key(id)
  local f = redis.call('HMGET', jk, 's', 'q', 'g', 't', 'k')
  local status, queue, gate = f[1], f[2], f[3]
  if status == 'queued' then
    if redis.call('ZREM', ready_key(queue), id) == 1 then
      if gate then unpark(gate, counts, woken) end
    elseif gate and redis.call('ZREM', gate_parked_key(gate), id) == 1 then
      bump(counts, queue .. SEP .. 'w', -1)
    end
    bump(counts, queue .. SEP .. 's', 1)
    emit(id, 'scheduled', f[4], queue, f[5])
  elseif status ~= 'scheduled' then
    return
  end
  redis.call('HSET', jk, 's', 'scheduled', 'p', payload, 'd', scheduled_for)
  redis.call('ZADD', KEYS[1], scheduled_for, id)
end

-- Stores the concurrency fields (group header at ARGV[h], marker 'c') and takes the unique key.
local function store_concurrency(jk, id, h)
  local unique, gate = ARGV[h + 9], ARGV[h + 12]
  local fields = {}
  if unique ~= '' then
    fields[#fields + 1], fields[#fields + 2] = 'u', unique
    if ARGV[h + 10] == 'start' then fields[#fields + 1], fields[#fields + 2] = 'U', '1' end
    if ARGV[h + 11] ~= '' then fields[#fields + 1], fields[#fields + 2] = 'ux', ARGV[h + 11] end
    redis.call('HSET', KEYS[5], unique, id)
  end
  if gate ~= '' then
    fields[#fields + 1], fields[#fields + 2] = 'g', gate
    fields[#fields + 1], fields[#fields + 2] = 'G', ARGV[h + 13]
  end
  if ARGV[h + 14] ~= '' then fields[#fields + 1], fields[#fields + 2] = 'X', ARGV[h + 14] end
  if #fields == 0 then return end
  redis.call('HSET', jk, unpack(fields))
end

local group = ARGV[3]
local members = 0
local position = 0
local h = group == '' and 4 or 8
local member_ids = {}

-- A named group whose name is taken: the stored one answers, nothing is stored.
if group ~= '' and ARGV[7] ~= '' then
  local named = redis.call('GET', group_name_key(ARGV[7]))
  if named and redis.call('EXISTS', group_key(named)) == 1 then
    return {0, named, redis.call('HGET', group_key(named), 'm') or ''}
  end
end
-- A group is all or none: a job id already stored (a resend) stores nothing of it.
if group ~= '' then
  local clash = {}
  local at, p = h, 0
  while at <= #ARGV do
    local i = at + (ARGV[at + 8] == '' and 9 or 16)
    for _ = 1, tonumber(ARGV[at]) do
      p = p + 1
      if redis.call('EXISTS', job_key(ARGV[i])) == 1 then
        clash[#clash + 1], clash[#clash + 2] = p, ARGV[i]
      end
      i = i + 2
    end
    at = i
  end
  if #clash > 0 then return clash end
end
while h <= #ARGV do
  local n, task, queue, max_attempts = tonumber(ARGV[h]), ARGV[h + 1], ARGV[h + 2], ARGV[h + 3]
  local key, priority, enqueued_at, scheduled_for = ARGV[h + 4], ARGV[h + 5], ARGV[h + 6], ARGV[h + 7]
  local plain = ARGV[h + 8] == ''
  local unique = not plain and ARGV[h + 9] ~= '' and ARGV[h + 9]
  local handoff = plain and group == ''
  local at = tonumber(enqueued_at)
  local scheduled = tonumber(scheduled_for) > at
  handoff = handoff and not scheduled
  local score = fifo_score(priority, enqueued_at)
  local status = scheduled and 'scheduled' or 'queued'
  local fields = {'t', task, 'q', queue, 'p', '', 's', status, 'e', enqueued_at}
  if max_attempts ~= DEFAULT_MAX_ATTEMPTS then
    fields[#fields + 1], fields[#fields + 2] = 'm', max_attempts
  end
  -- A due time other than the enqueue's (a periodic tick, enqueued just after it) is kept too.
  if scheduled or tonumber(scheduled_for) ~= at then
    fields[#fields + 1], fields[#fields + 2] = 'd', scheduled_for
  end
  if priority ~= '0' then fields[#fields + 1], fields[#fields + 2] = 'r', priority end
  if key ~= '' then fields[#fields + 1], fields[#fields + 2] = 'k', key end
  local batch = nil
  if not scheduled then
    batch = ready[queue]
    if batch == nil then batch = {}; ready[queue] = batch end
  end
  local stored = 0
  local i = h + (plain and 9 or 16)
  for _ = 1, n do
    local id = ARGV[i]
    local jk = job_key(id)
    local holder = unique and redis.call('HGET', KEYS[5], unique)
    position = position + 1
    if redis.call('EXISTS', jk) == 1 then
      out[#out + 1], out[#out + 2] = position, id
    elseif holder and holds(holder, unique, at) then
      if ARGV[h + 15] == '1' then debounce(holder, ARGV[i + 1], scheduled_for) end
      out[#out + 1], out[#out + 2] = position, holder
    else
      fields[6] = ARGV[i + 1]
      if group ~= '' and id == group then
        fields[8] = 'scheduled'
        redis.call('HSET', jk, unpack(fields))
        fields[8] = status
        bump(counts, queue .. SEP .. 's', 1)
        emit(id, 'scheduled', task, queue, key)
      else
        local worker, lease_until, inbox_ttl
        if handoff and #batch == 0 and redis.call('ZCARD', ready_key(queue)) == 0
            and not queue_paused(queue) then
          worker, lease_until, inbox_ttl = pop_idle(queue)
        end
        handoff = worker ~= nil -- no idle worker now: none for the rest of this group
        if worker then -- one HSET: the fields, running as claim.lua leaves them
          local n = #fields
          fields[8] = 'running'
          fields[n + 1], fields[n + 2], fields[n + 3], fields[n + 4] = 'a', 1, 'b', enqueued_at
          fields[n + 5], fields[n + 6], fields[n + 7], fields[n + 8] = 'w', worker, 'l', lease_until
          redis.call('HSET', jk, unpack(fields))
          for i = n + 8, n + 1, -1 do fields[i] = nil end
          fields[8] = status
        else
          redis.call('HSET', jk, unpack(fields))
        end
        if scheduled then
          redis.call('ZADD', KEYS[1], scheduled_for, id)
        elseif worker then
          redis.call('ZADD', KEYS[6], lease_until, id)
          bump(counts, queue .. SEP .. 'r', 1)
          local ik = inbox_key(worker)
          redis.call('RPUSH', ik, inbox_row(id, enqueued_at, lease_until, task, queue,
            fields[6], max_attempts, key, priority == '0' and '' or priority, enqueued_at))
          redis.call('PEXPIRE', ik, inbox_ttl)
        else
          batch[#batch + 1], batch[#batch + 2] = score, id
        end
        if group ~= '' then
          redis.call('HSET', jk, 'gp', group)
          members = members + 1
          member_ids[members] = id
        end
        emit(id, status, task, queue, key)
        if worker then emit(id, 'running', task, queue, key) end
      end
      if key ~= '' then redis.call('ZADD', key_index(key), 0, id) end
      if not plain then store_concurrency(jk, id, h) end
      all[#all + 1], all[#all + 2] = 0, id
      stored = stored + 1
    end
    i = i + 2
  end
  if stored > 0 then
    queues[queue] = true
    if scheduled then bump(counts, queue .. SEP .. 's', stored) end
  end
  h = i
end
if group ~= '' then
  local g = {'n', members, 'left', members, 'at', ARGV[5], 'ret', ARGV[6]}
  if ARGV[4] ~= '' then g[#g + 1], g[#g + 2] = 'k', ARGV[4] end
  if redis.call('EXISTS', job_key(group)) == 1 then g[#g + 1], g[#g + 2] = 'cb', '1' end
  if ARGV[7] ~= '' then
    g[#g + 1], g[#g + 2] = 'nm', ARGV[7]
    g[#g + 1], g[#g + 2] = 'm', table.concat(member_ids, ',')
    redis.call('SET', group_name_key(ARGV[7]), group)
  end
  redis.call('HSET', group_key(group), unpack(g))
end
trim_events()
if #all > 0 then
  zadd_many(KEYS[2], all)
  for queue in pairs(queues) do redis.call('SADD', KEYS[3], queue) end
  for queue, batch in pairs(ready) do
    if #batch > 0 then zadd_many(ready_key(queue), batch) end
  end
  flush_counts(KEYS[4], counts)
  for queue, batch in pairs(ready) do
    if #batch > 0 then redis.call('PUBLISH', ARGV[2], queue) end
  end
else
  flush_counts(KEYS[4], counts) -- a debounce only
end
publish_all(ARGV[2], woken)
return out
