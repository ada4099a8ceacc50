-- _dependencies.lua: jobs that wait for other jobs (PRODUCT §16, duly.backends.dependencies).
--@include _jobs
--@include _unique
--@include _events
--@include _groups
--
-- Keys (keys.py, "Dependencies"): da:<id> the set of the jobs that wait (or waited) for job
-- <id>, whose hash then has `dh` = '1' (so finishing a job without dependents costs nothing
-- more). A dependent's hash has `aw` (its dependencies not succeeded yet), `ap` (the one whose
-- result is its chain input), `ai` (that input, copied at release), `ab` (the dependency that
-- cancelled it) and `ar` (seconds it is kept once cancelled by one). While it waits it is
-- `scheduled` with no `d` (in no index a promotion or a claim reads), counted in qc <queue>s.
local function dependents_key(id) return PREFIX .. 'da:' .. id end

-- A JSON error history (false if none) with `entry` (a JSON object) appended.
local function history_with(history, entry)
  if not history or string.find(history, '^%s*%[%s*%]%s*$') then return '[' .. entry .. ']' end
  local head = string.match(history, '^(%s*%[.*)%]%s*$')
  if head == nil then return '[' .. entry .. ']' end
  return head .. ',' .. entry .. ']'
end

-- Dependent `x` (its hash fields `f` as dependency_cancel reads them) ends `cancelled` at
-- `now` because dependency `cause` (task `task`) ended `how`: DependencyFailed appended, its
-- unique hold dropped, kept `ar` seconds, its event, its group told. `counted`: it was counted
-- as scheduled in qc.
local function dependency_cancel(x, f, cause, task, how, now, counted, woken)
  local xk = job_key(x)
  local message = 'dependency ' .. cause .. ' (' .. (task or '?') .. ') ' ..
    (how == 'failed' and 'failed' or 'was cancelled')
  local entry = cjson.encode({type = 'DependencyFailed', message = message, traceback = '',
    at = tonumber(now), attempt = tonumber(f[8]) or 0})
  local expire = tonumber(now) + (tonumber(f[9]) or 0)
  redis.call('HSET', xk, 's', 'cancelled', 'f', now, 'ab', cause, 'x', history_with(f[7], entry),
    'z', expire)
  redis.call('HDEL', xk, 'd')
  if counted then redis.call('HINCRBY', PREFIX .. 'qc', f[4] .. SEP .. 's', -1) end
  redis.call('ZADD', status_key('cancelled'), 0, x)
  redis.call('ZADD', PREFIX .. 'exp', expire, x)
  if f[10] then end_hold(PREFIX .. 'u', x, f[10], false) end
  emit(x, 'cancelled', f[5], f[4], f[6])
  if f[11] then settle_member(f[11], x, 'cancelled', now, woken) end
end

-- The fields dependency_cancel reads, in its order.
local function dependent_fields(x)
  return redis.call('HMGET', job_key(x), 's', 'd', 'aw', 'q', 't', 'k', 'x', 'a', 'ar', 'u', 'gp',
    'dh')
end

-- Job `id` (task `task`) ended `how` ('failed' or 'cancelled') at `now`: every dependent still
-- waiting is cancelled (dependency_cancel), then theirs, down the whole tree.
local function dependency_ended(id, task, how, now, woken)
  local todo = {id}
  local tasks = {task}
  local hows = {how}
  local i = 1
  while todo[i] do
    for _, x in ipairs(redis.call('SMEMBERS', dependents_key(todo[i]))) do
      local f = dependent_fields(x)
      if f[1] == 'scheduled' and not f[2] and f[3] then
        dependency_cancel(x, f, todo[i], tasks[i], hows[i], now, true, woken)
        if f[12] then
          todo[#todo + 1], tasks[#tasks + 1], hows[#hows + 1] = x, f[5], 'cancelled'
        end
      end
    end
    i = i + 1
  end
end

-- Job `id` succeeded at `now` with `result` ('' = none): each dependent counts it once (a job
-- succeeds at most once); the one left with none waiting, waiting or cancelled by a dependency,
-- becomes `queued` at its FIFO place as released at `now` (as the SQL backends place it: by
-- when it was released, not enqueued; its queue woken), a chain step with its input.
local function dependency_succeeded(id, now, result, woken)
  for _, x in ipairs(redis.call('SMEMBERS', dependents_key(id))) do
    local xk = job_key(x)
    local f = redis.call('HMGET', xk, 's', 'd', 'aw', 'ap', 'ab', 'q', 'r', 't', 'k')
    if f[3] then
      local left = redis.call('HINCRBY', xk, 'aw', -1)
      if f[4] == id and result ~= '' then redis.call('HSET', xk, 'ai', result) end
      local release = false
      if left <= 0 and f[1] == 'scheduled' and not f[2] then
        redis.call('HINCRBY', PREFIX .. 'qc', f[6] .. SEP .. 's', -1)
        release = true
      elseif left <= 0 and f[1] == 'cancelled' and f[5] then
        redis.call('ZREM', status_key('cancelled'), x)
        redis.call('ZREM', PREFIX .. 'exp', x)
        redis.call('HDEL', xk, 'f', 'z', 'ab')
        release = true
      end
      if release then
        redis.call('HSET', xk, 's', 'queued', 'd', now)
        redis.call('ZADD', ready_key(f[6]), fifo_score(f[7], now), x)
        woken[f[6]] = true
        emit(x, 'queued', f[8], f[6], f[9])
      end
    end
  end
end
