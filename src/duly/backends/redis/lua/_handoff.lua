-- _handoff.lua: helpers of the direct hand-off (keys.py, "Hand-off"), included by claim.lua
-- and enqueue.lua.
--@include _jobs
--
-- A worker process whose claim (claim.lua, idle mode) found nothing registers as idle: its entry
-- iv:<worker> = "<lease_until> <inbox ttl ms> <queue> <queue>..." lives `ttl` ms (SET PX, the
-- server's clock, so a dead worker's registration lapses by itself), and it joins iw:<queue> of
-- each of its queues (score = its clock at registration: the newest is used first). enqueue.lua
-- then claims a plain new job for the newest live registrant of the job's queue in the same
-- script (running, attempts 1, worker, lease_until from the entry) and pushes the job's row to
-- the worker's inbox ib:<worker>, which the worker waits on with BLPOP. One registration carries
-- one job: using it deletes it. A worker's next claim withdraws its registration and takes what
-- its inbox holds first, so a job handed while it stopped waiting is never left behind; a job in
-- the inbox of a worker that died is `running` under its lease and recover.lua requeues it.
local function idle_key(queue) return PREFIX .. 'iw:' .. queue end
local function idle_entry_key(worker) return PREFIX .. 'iv:' .. worker end
local function inbox_key(worker) return PREFIX .. 'ib:' .. worker end

-- Stale members (their entry lapsed) one pop_idle drops at most before giving up.
local IDLE_SCAN = 8

-- Registers `worker` idle on `queues` for `ttl_ms`; a job handed to it gets `lease_until`.
local function register_idle(worker, queues, now, ttl_ms, lease_until)
  local inbox_ttl = math.ceil((tonumber(lease_until) - tonumber(now)) * 1000)
  redis.call('SET', idle_entry_key(worker),
    lease_until .. ' ' .. inbox_ttl .. ' ' .. table.concat(queues, ' '), 'PX', ttl_ms)
  for _, queue in ipairs(queues) do
    local ik = idle_key(queue)
    redis.call('ZADD', ik, now, worker)
    redis.call('PEXPIRE', ik, ttl_ms) -- the set outlives no registration
  end
end

-- Withdraws `worker`'s registration and returns what its inbox holds (rows, oldest first).
local function withdraw_idle(worker, queues)
  redis.call('DEL', idle_entry_key(worker))
  for _, queue in ipairs(queues) do redis.call('ZREM', idle_key(queue), worker) end
  local ik = inbox_key(worker)
  local held = redis.call('LRANGE', ik, 0, -1)
  if #held > 0 then redis.call('DEL', ik) end
  return held
end

-- Pops the newest live registrant of `queue` (deleting its registration everywhere): its id,
-- the lease_until of a job handed to it and its inbox TTL (ms); nil when there is none.
local function pop_idle(queue)
  local ik = idle_key(queue)
  for _ = 1, IDLE_SCAN do
    local top = redis.call('ZPOPMAX', ik)
    if #top == 0 then return nil end
    local worker = top[1]
    local entry = redis.call('GETDEL', idle_entry_key(worker))
    if entry then
      local parts = {}
      for part in string.gmatch(entry, '%S+') do parts[#parts + 1] = part end
      for i = 3, #parts do
        if parts[i] ~= queue then redis.call('ZREM', idle_key(parts[i]), worker) end
      end
      return worker, parts[1], parts[2]
    end
  end
  return nil
end

-- A handed job's inbox row: netstrings ("<length>:<bytes>") of id, started_at, lease_until,
-- task, queue, payload, max_attempts, key ('' = none), priority ('' = 0), enqueued_at
-- (codec.handed reads it; attempts is 1).
local function inbox_row(...)
  local parts = {}
  for i, value in ipairs({...}) do parts[i] = #value .. ':' .. value end
  return table.concat(parts)
end
