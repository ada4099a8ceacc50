-- claim.lua: atomically take up to `limit` ready jobs for one worker, queues tried in order.
--
-- KEYS[1] running zset     KEYS[2] queue counts     KEYS[3] unique holds hash (`u`)
-- ARGV[1] prefix   ARGV[2] worker   ARGV[3] limit   ARGV[4] now   ARGV[5] lease_until
-- ARGV[6] idle TTL (ms; '' = a plain claim)   ARGV[7] lease_until of a job handed while idle
-- ARGV[8] '1' = the worker may be registered (withdraw first)   ARGV[9..] queue names, in the
-- order to try them
-- Each taken job emits a `running` event.
-- Returns {id, row, id, row, ...}: each job's fields after the change, by position (nil when
-- absent): t, q, p, a, m, k, r, e, d, o, x, n, z, y, cu (the caller knows s, b, w and l, and
-- that f is gone). One HMGET per job is the only read.
--
-- Idle mode (ARGV[6] set; _handoff.lua): with ARGV[8] = '1', the worker's registration is
-- withdrawn and the rows in its inbox (jobs already claimed for it by enqueue.lua) count
-- against `limit` (a worker that is not registered has none: skipped); when nothing at all is
-- taken and `limit` is not reached, the worker registers as idle for ARGV[6] ms. Returns
-- {inbox rows, {id, row, ...}}.
--
-- Each claimed job leaves its ready zset (ZPOPMIN: best score first) and enters `run` scored
-- by lease_until, with status `running`, attempts + 1, started_at (b) = now, worker (w),
-- lease_until (l); finished_at (f) is removed; result (o) is kept (the previous run's, for a job
-- that runs `again`). A popped id whose hash is not `queued` (a stale entry) is dropped from the
-- ready zset and not returned.
--
-- Gates: a popped job with a gate (g) whose running set already has G members is parked
-- instead: moved to gw:<gate> with its ready score, still `queued`, counted in `<queue> SEP w`,
-- not charged; the claim goes on popping. A taken gated job joins gr:<gate> at once, so later
-- jobs of the same claim see its slot taken. A job whose hold ends at start (U) ends it here.
--
-- Expiry (_expiry.lua): a popped queued job whose expiry (X) has passed is not taken but ended
-- `cancelled` with a JobExpired error (end_expired), and follows the taken jobs in the reply
-- as {id, {'expired', row, X, b}} (row as for a taken job, its errors after the change; the
-- caller knows s, f, z and l: only a job this claim ended is reported, from what this script
-- read and wrote, never read back); it does not count against `limit`, but
-- at most EXPIRED_CAP are ended a claim (Redis is blocked meanwhile): the ones met past it
-- are put back as they were (a later claim ends them; none starts), and past SKIP_CAP of
-- those the claim stops (without registering idle: work is left).
-- A started job loses its expiry (X): it applies only to a job that never started.
--
-- Quarantine fairness: a job that already lost a worker (n > 0) may be a poison pill that kills
-- whoever runs it, so it is handed out alone: only as the first job of a claim, and the claim
-- stops after it. Jobs popped but not taken go back with their scores unchanged.
--
-- A paused queue (_pausing.lua) is skipped: it gives nothing.
--@include _jobs
--@include _unique
--@include _concurrency
--@include _events
--@include _handoff
--@include _expiry
--@include _pausing
local want = tonumber(ARGV[3])
local worker, now, lease_until = ARGV[2], ARGV[4], ARGV[5]
local out = {}
local running = {}
local counts = {}
local woken = {}
local expired = {}
local done = false
local capped = false  -- stopped by the expiry caps: expired jobs are left, do not wait idle
local idle_ttl, handed = ARGV[6], nil
if idle_ttl ~= '' then
  handed = {}
  if ARGV[8] == '1' then
    handed = withdraw_idle(worker, {unpack(ARGV, 9)})
    want = want - #handed
  end
end
for qi = 9, #ARGV do
  if want <= 0 or done then break end
  local queue = ARGV[qi]
  local rk = ready_key(queue)
  local taken = 0
  local aside = {}
  while want > 0 and not done and not queue_paused(queue) do
    local popped = redis.call('ZPOPMIN', rk, want)
    if #popped == 0 then break end
    for i = 1, #popped, 2 do
      local id = popped[i]
      if done then
        redis.call('ZADD', rk, popped[i + 1], id)
      else
        local jk = job_key(id)
        local h = redis.call('HMGET', jk, 't', 'q', 'p', 'a', 'm', 'k', 'r', 'e', 'd', 'o', 'x',
          'n', 'z', 'y', 's', 'f', 'g', 'G', 'u', 'U', 'cu', 'X', 'b')
        local status, attempts, lost = h[15], tonumber(h[4]) or 0, tonumber(h[12]) or 0
        local gate, gate_limit, hold = h[17], tonumber(h[18]) or 0, h[19]
        if status == 'queued' and has_expired(h[22], now) and #expired >= 2 * EXPIRED_CAP then
          -- Left for a later claim (never started): set aside until this queue is done, so
          -- the jobs behind it still start; past SKIP_CAP of them the claim stops.
          aside[#aside + 1], aside[#aside + 2] = popped[i + 1], id
          if #aside >= 2 * SKIP_CAP then
            done, capped = true, true
          end
        elseif status == 'queued' and has_expired(h[22], now) then
          local errors = end_expired(KEYS[3], id, now, counts, woken)
          expired[#expired + 1] = id
          expired[#expired + 1] = {'expired', {h[1], h[2], h[3], attempts, h[5], h[6], h[7], h[8],
            h[9], h[10], errors, h[12], false, h[14], h[21]}, h[22], h[23]}
        elseif status == 'queued' and lost > 0 and #out > 0 then
          redis.call('ZADD', rk, popped[i + 1], id)
          done = true
        elseif status == 'queued' and gate
            and redis.call('SCARD', gate_running_key(gate)) >= gate_limit then
          redis.call('ZADD', gate_parked_key(gate), popped[i + 1], id)
          bump(counts, queue .. SEP .. 'w', 1)
        elseif status == 'queued' then
          attempts = attempts + 1
          redis.call('HSET', jk, 's', 'running', 'a', attempts, 'b', now, 'w', worker,
            'l', lease_until)
          if h[16] then redis.call('HDEL', jk, 'f') end
          -- Started: its expiry no longer applies (a recovery, a release or a retry that
          -- queues it again must not end it as "never run").
          if h[22] then redis.call('HDEL', jk, 'X') end
          if gate then redis.call('SADD', gate_running_key(gate), id) end
          if hold and h[20] then end_hold(KEYS[3], id, hold, false) end
          emit(id, 'running', h[1], h[2], h[6])
          out[#out + 1] = id
          out[#out + 1] = {h[1], h[2], h[3], attempts, h[5], h[6], h[7], h[8], h[9], h[10], h[11],
            h[12], h[13], h[14], h[21]}
          running[#running + 1] = lease_until
          running[#running + 1] = id
          want = want - 1
          taken = taken + 1
          if lost > 0 then done = true end
        end
      end
    end
  end
  if #aside > 0 then redis.call('ZADD', rk, unpack(aside)) end
  if taken > 0 then bump(counts, queue .. SEP .. 'r', taken) end
end
zadd_many(KEYS[1], running)
flush_counts(KEYS[2], counts)
trim_events()
publish_all(PREFIX .. 'wake', woken)
local took = #out
for i = 1, #expired, 2 do out[#out + 1], out[#out + 2] = expired[i], expired[i + 1] end
if handed == nil then return out end
if #handed == 0 and took == 0 and want > 0 and not capped then
  register_idle(worker, {unpack(ARGV, 9)}, now, idle_ttl, ARGV[7])
end
return {handed, out}
