-- finish.lua: apply a batch of run outcomes from one worker.
--
-- KEYS[1] running zset    KEYS[2] due zset          KEYS[3] expiry zset   KEYS[4] queue counts
-- KEYS[5] counter minutes zset                      KEYS[6] counter bucket of this minute
-- KEYS[7] unique holds hash (`u`)
-- ARGV[1] prefix   ARGV[2] worker   ARGV[3] now   ARGV[4] minute   ARGV[5] bucket TTL (s)
-- ARGV[6] wake channel
-- ARGV[7..] seven per outcome: id, kind (succeeded|failed|retry|release|again), result,
--           errors, run_at, expire_at, rate_slot ('' = none for each of the last five)
-- Returns one integer per outcome: 1 applied, 0 dropped.
--
-- An outcome applies only if the job is `running` under ARGV[2] and no cancel of it was
-- requested (field `c`): such a job ends `cancelled` instead (end_cancelled) and its outcome is
-- not applied (0). An applied outcome: the job leaves `run`, loses
-- its lease (l) and, but for release, its rate slot (y), and:
--   succeeded -> `succeeded`, finished_at, result (o; removed if none, as claim keeps the one
--                of a previous `again` run); in s:succeeded and (with expire_at) `exp`
--   failed    -> `failed`, finished_at, errors; in s:failed and (with expire_at) `exp`
--   retry     -> `retrying` with scheduled_for = run_at (now if none), errors; in `due`;
--                worker cleared
--   release   -> attempts - 1, worker cleared, rate slot (y) = rate_slot; `scheduled` in
--                `due` if run_at > now, else `queued` at the head of its priority (score ms
--                part 0) and its queue woken
--   again     -> attempts and lost back to 0 (a, n removed), worker cleared, result stored
--                (o; removed if none), scheduled_for = run_at (now if none); `scheduled` in
--                `due` if run_at > now, else `queued` at its FIFO place and its queue woken
-- A gated job frees its slot, which unparks the best parked job of its gate (free_gate).
-- succeeded and failed end the unique hold (end_hold); the other kinds keep it.
-- Each changed job emits an event with its new status; a group member's succeeded or failed
-- is recorded in its group (settle_member), which may queue the group's callback; a job with
-- dependents (`dh`) releases or cancels them (_dependencies.lua).
-- Counters: succeeded and again -> s, failed -> f, retry -> r in the minute bucket (field
-- task SEP queue SEP letter), which expires after the TTL. Index updates are batched.
--@include _jobs
--@include _unique
--@include _concurrency
--@include _events
--@include _groups
--@include _cancel
--@include _dependencies
--@include _freshness
local worker, now, minute = ARGV[2], ARGV[3], ARGV[4]
local now_n = tonumber(now)
local out = {}
local counts = {}
local stats = {}
local woken = {}
local left_run = {}
local finished = {succeeded = {}, failed = {}}
local expiring = {}
local due = {}
local n = 0

for i = 7, #ARGV, 7 do
  local id, kind = ARGV[i], ARGV[i + 1]
  local result, errors, run_at, expire_at = ARGV[i + 2], ARGV[i + 3], ARGV[i + 4], ARGV[i + 5]
  local jk = job_key(id)
  local f = redis.call('HMGET', jk, 's', 'w', 't', 'q', 'r', 'g', 'u', 'c', 'k', 'gp', 'dh')
  n = n + 1
  if f[1] ~= 'running' or f[2] ~= worker then
    out[n] = 0
  elseif f[8] then
    end_cancelled(KEYS[1], KEYS[3], KEYS[7], id, f[4], f[6], f[7], f[8], now, counts, woken)
    fresh_ended(id, 'cancelled', now, '') -- a freshness scope's sync (_freshness.lua)
    out[n] = 0
  else
    local task, queue = f[3], f[4]
    left_run[#left_run + 1] = id
    bump(counts, queue .. SEP .. 'r', -1)
    if kind == 'succeeded' or kind == 'failed' then
      local set = {'s', kind, 'f', now}
      if kind == 'succeeded' and result ~= '' then set[5], set[6] = 'o', result end
      if kind == 'failed' and errors ~= '' then set[5], set[6] = 'x', errors end
      if expire_at ~= '' then
        set[#set + 1], set[#set + 2] = 'z', expire_at
        expiring[#expiring + 1], expiring[#expiring + 2] = expire_at, id
      end
      redis.call('HSET', jk, unpack(set))
      if kind == 'succeeded' and result == '' then
        redis.call('HDEL', jk, 'l', 'y', 'o') -- no result: not the one of a previous run
      else
        redis.call('HDEL', jk, 'l', 'y')
      end
      if f[7] then
        end_hold(KEYS[7], id, f[7], not hold_expired(redis.call('HGET', jk, 'ux'), now))
      end
      local index = finished[kind]
      index[#index + 1], index[#index + 2] = 0, id
      bump(stats, task .. SEP .. queue .. SEP .. (kind == 'succeeded' and 's' or 'f'), 1)
      emit(id, kind, task, queue, f[9])
      if f[10] then settle_member(f[10], id, kind, now, woken) end
      if f[11] and kind == 'succeeded' then -- its dependents (_dependencies.lua)
        dependency_succeeded(id, now, result, woken)
      elseif f[11] then
        dependency_ended(id, task, 'failed', now, woken)
      end
    elseif kind == 'retry' then
      if run_at == '' then run_at = now end
      if errors ~= '' then
        redis.call('HSET', jk, 's', 'retrying', 'd', run_at, 'x', errors)
      else
        redis.call('HSET', jk, 's', 'retrying', 'd', run_at)
      end
      redis.call('HDEL', jk, 'w', 'l', 'y')
      due[#due + 1], due[#due + 2] = run_at, id
      bump(counts, queue .. SEP .. 's', 1)
      bump(stats, task .. SEP .. queue .. SEP .. 'r', 1)
      emit(id, 'retrying', task, queue, f[9])
    elseif kind == 'release' then
      if redis.call('HINCRBY', jk, 'a', -1) < 0 then redis.call('HSET', jk, 'a', 0) end
      if ARGV[i + 6] ~= '' then
        redis.call('HSET', jk, 'y', ARGV[i + 6])
        redis.call('HDEL', jk, 'w', 'l')
      else
        redis.call('HDEL', jk, 'w', 'l', 'y')
      end
      if run_at ~= '' and tonumber(run_at) > now_n then
        redis.call('HSET', jk, 's', 'scheduled', 'd', run_at)
        due[#due + 1], due[#due + 2] = run_at, id
        bump(counts, queue .. SEP .. 's', 1)
        emit(id, 'scheduled', task, queue, f[9])
      else
        redis.call('HSET', jk, 's', 'queued')
        redis.call('ZADD', ready_key(queue), ready_score(f[5], 0), id)
        woken[queue] = true
        emit(id, 'queued', task, queue, f[9])
      end
    elseif kind == 'again' then
      if run_at == '' then run_at = now end
      if result ~= '' then
        redis.call('HSET', jk, 'd', run_at, 'o', result)
        redis.call('HDEL', jk, 'a', 'n', 'w', 'l', 'y')
      else
        redis.call('HSET', jk, 'd', run_at)
        redis.call('HDEL', jk, 'a', 'n', 'w', 'l', 'y', 'o')
      end
      if tonumber(run_at) > now_n then
        redis.call('HSET', jk, 's', 'scheduled')
        due[#due + 1], due[#due + 2] = run_at, id
        bump(counts, queue .. SEP .. 's', 1)
        emit(id, 'scheduled', task, queue, f[9])
      else
        redis.call('HSET', jk, 's', 'queued')
        redis.call('ZADD', ready_key(queue), fifo_score(f[5], redis.call('HGET', jk, 'e')), id)
        woken[queue] = true
        emit(id, 'queued', task, queue, f[9])
      end
      bump(stats, task .. SEP .. queue .. SEP .. 's', 1)
    else
      return redis.error_reply('finish: unknown outcome kind ' .. kind)
    end
    if f[6] then free_gate(f[6], id, counts, woken) end
    -- a freshness scope's sync updates its scope (_freshness.lua)
    fresh_ended(id, kind == 'retry' and 'retrying' or kind, now, errors, woken)
    out[n] = 1
  end
end
zrem_many(KEYS[1], left_run)
zadd_many(status_key('succeeded'), finished.succeeded)
zadd_many(status_key('failed'), finished.failed)
zadd_many(KEYS[3], expiring)
zadd_many(KEYS[2], due)
flush_counts(KEYS[4], counts)
if next(stats) ~= nil then
  flush_counts(KEYS[6], stats)
  redis.call('EXPIRE', KEYS[6], ARGV[5])
  redis.call('ZADD', KEYS[5], minute, minute)
end
trim_events()
publish_all(ARGV[6], woken)
return out
