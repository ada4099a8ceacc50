-- recover.lua: recover running jobs whose lease lapsed, each exactly once.
--
-- KEYS[1] running zset    KEYS[2] expiry zset    KEYS[3] queue counts
-- KEYS[4] counter minutes zset                   KEYS[5] counter bucket of this minute
-- KEYS[6] unique holds hash (`u`)
-- ARGV[1] prefix   ARGV[2] now   ARGV[3] max_lost   ARGV[4] limit   ARGV[5] failed_expire_at
-- ARGV[6] minute   ARGV[7] bucket TTL (s)   ARGV[8] wake channel
-- Returns {id, 1 requeued | 0 quarantined | 2 cancelled, id, ...}.
--
-- Takes up to `limit` ids of `run` with lease_until < now and removes them from `run` in the
-- same step, so a concurrent call never sees them again. Each gets lost + 1 and loses its lease
-- and rate slot (y); a gated job frees its slot (free_gate). Below max_lost it is `queued` at
-- the head of its priority, worker cleared, attempts kept. At max_lost it is quarantined:
-- `failed`, finished_at = now, a LostWorker entry appended to its errors JSON list (by string
-- splicing: the stored history is never re-encoded), expire_at = failed_expire_at, counted as
-- a failure, its unique hold ended (end_hold). A job whose cancel was requested (field `c`)
-- is neither: it ends `cancelled` (end_cancelled), its `lost` unchanged. Each emits its event;
-- a quarantined group member is recorded in its group (settle_member); a quarantined job's
-- dependents still waiting are cancelled (dependency_ended).
--@include _jobs
--@include _unique
--@include _concurrency
--@include _events
--@include _groups
--@include _cancel
--@include _freshness
--@include _dependencies
local now = ARGV[2]
local max_lost = tonumber(ARGV[3])
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. now, 'LIMIT', 0, tonumber(ARGV[4]))
local out = {}
local counts = {}
local stats = {}
local woken = {}

local function append_error(history, entry)
  if history == false or history == nil or string.find(history, '^%s*%[%s*%]%s*$') then
    return '[' .. entry .. ']'
  end
  local head = string.match(history, '^(%s*%[.*)%]%s*$')
  if head == nil then return '[' .. entry .. ']' end
  return head .. ',' .. entry .. ']'
end

for _, id in ipairs(ids) do
  redis.call('ZREM', KEYS[1], id)
  local jk = job_key(id)
  local f = redis.call('HMGET', jk, 's', 'q', 'r', 't', 'a', 'x', 'g', 'u', 'ux', 'c', 'k', 'gp',
    'dh')
  if f[1] == 'running' and f[10] then
    end_cancelled(KEYS[1], KEYS[2], KEYS[6], id, f[2], f[7], f[8], f[10], now, counts, woken)
    fresh_ended(id, 'cancelled', now, '') -- a freshness scope's sync (_freshness.lua)
    out[#out + 1] = id
    out[#out + 1] = 2
  elseif f[1] == 'running' then
    local queue = f[2]
    local lost = redis.call('HINCRBY', jk, 'n', 1)
    bump(counts, queue .. SEP .. 'r', -1)
    redis.call('HDEL', jk, 'l', 'y')
    if f[7] then free_gate(f[7], id, counts, woken) end
    if lost < max_lost then
      redis.call('HSET', jk, 's', 'queued')
      redis.call('HDEL', jk, 'w')
      redis.call('ZADD', ready_key(queue), ready_score(f[3], 0), id)
      woken[queue] = true
      emit(id, 'queued', f[4], queue, f[11])
      out[#out + 1] = id
      out[#out + 1] = 1
    else
      local entry = '{"type":"LostWorker","message":"lost its worker ' .. lost ..
        ' times","traceback":"","at":' .. now .. ',"attempt":' .. (tonumber(f[5]) or 0) .. '}'
      redis.call('HSET', jk, 's', 'failed', 'f', now, 'x', append_error(f[6], entry),
        'z', ARGV[5])
      redis.call('ZADD', status_key('failed'), 0, id)
      redis.call('ZADD', KEYS[2], ARGV[5], id)
      bump(stats, f[4] .. SEP .. queue .. SEP .. 'f', 1)
      if f[8] then end_hold(KEYS[6], id, f[8], not hold_expired(f[9], now)) end
      emit(id, 'failed', f[4], queue, f[11])
      if f[12] then settle_member(f[12], id, 'failed', now, woken) end
      if f[13] then dependency_ended(id, f[4], 'failed', now, woken) end
      fresh_ended(id, 'failed', now, '[' .. entry .. ']') -- a freshness scope's sync
      out[#out + 1] = id
      out[#out + 1] = 0
    end
  end
end
flush_counts(KEYS[3], counts)
if next(stats) ~= nil then
  flush_counts(KEYS[5], stats)
  redis.call('EXPIRE', KEYS[5], ARGV[7])
  redis.call('ZADD', KEYS[4], ARGV[6], ARGV[6])
end
trim_events()
publish_all(ARGV[8], woken)
return out
