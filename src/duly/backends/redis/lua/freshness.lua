-- freshness.lua: apply freshness requests (check, request, touch, baseline) to their scopes,
-- enqueueing each scope's sync job when due (freshness_state.decide), atomically per call.
--
-- KEYS[1] all-jobs index   KEYS[2] queues set
-- ARGV[1] prefix   ARGV[2] wake channel   ARGV[3] now
-- ARGV[4..] 17 per request: name, scope, reason, active ('1'|'0'), max_staleness, full_every,
--   max_backoff, offset, jitter, then the sync job: id, task, queue, max_attempts, key ('' =
--   none), base priority, full payload, delta payload.
-- Returns per request {last_success, last_attempt, failures, last_error, next_due,
--   requested_by, job_id, enqueued (1|0), follow_up} ('' = none).
--
-- A new scope gets next_due = its first baseline time. The policy of the latest call is stored.
-- A scope with an active sync (`j`) never gets a second one (`j` is cleared by the step that
-- ends that job: fresh_ended in finish, recover and cancel). A stored sync job is `queued` with
-- field `fs` = the scope's member, the priority freshness_state.sync_priority, the key given;
-- it emits its `queued` event, as an enqueue does (fresh_store_sync). A touch while that sync
-- runs queues one follow-up delta instead (fields fu, fp, fr: id, payload, priority; stored
-- by the finish that records the sync's success, fresh_ended); later touches coalesce into it.
--@include _jobs
--@include _events
--@include _freshness
local now = ARGV[3]
local now_n = tonumber(now)
local out = {}
local woken = {}

local function decide(reason, active, ls, ms, nf, nd, busy, running, follow_up)
  if busy then
    if reason == 'touch' and running and not follow_up then return 'follow' end
    return ''
  end
  if reason == 'request' then return 'full' end
  if reason == 'baseline' then
    if nd == nil or nd <= now_n then return 'full' end
    return ''
  end
  if nf > 0 and nd ~= nil and nd > now_n then return '' end
  if ls == nil then return 'full' end
  if reason == 'touch' then return 'delta' end
  local score = math.max(now_n - ls, 0) / ms
  if score >= 1 then return 'full' end
  if score >= 0.5 and active then return 'delta' end
  return ''
end

local function priority(base, reason, ls, ms)
  local boost = 100
  if reason ~= 'request' and ls ~= nil then
    boost = math.min(100, math.floor(10 * math.max(now_n - ls, 0) / ms))
  end
  return math.max(-1000, math.min(1000, base + boost))
end

for i = 4, #ARGV, 17 do
  local name, scope, reason, active = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3] == '1'
  local ms, fe, of = tonumber(ARGV[i + 4]), tonumber(ARGV[i + 5]), tonumber(ARGV[i + 7])
  local member = name .. SEP .. scope
  local fk = fresh_key(member)
  local f = redis.call('HMGET', fk, 'ls', 'nf', 'nd', 'j', 'fu')
  local ls, nf, nd = tonumber(f[1]), tonumber(f[2]) or 0, tonumber(f[3])
  if nd == nil then
    nd = fresh_next_baseline(now_n, of, fe)
    redis.call('ZADD', fresh_due_key(name), nd, scope)
    redis.call('HSET', fk, 'nd', nd, 'nf', 0)
  end
  redis.call('HSET', fk, 'ms', ARGV[i + 4], 'fe', ARGV[i + 5], 'mb', ARGV[i + 6], 'of', ARGV[i + 7])
  redis.call('ZADD', fresh_index(name), ls and (ls + ms) or FRESH_NEVER, scope)
  local running = f[4] and redis.call('HGET', job_key(f[4]), 's') == 'running'
  local want = decide(reason, active, ls, ms, nf, nd, f[4] ~= false, running, f[5])
  if reason == 'baseline' and nd <= now_n then
    nd = fresh_next_baseline(now_n, of, fe)
    redis.call('HSET', fk, 'nd', nd)
    redis.call('ZADD', fresh_due_key(name), nd, scope)
  end
  local enqueued = 0
  if want == 'follow' then
    redis.call('HSET', fk, 'fu', ARGV[i + 9], 'fp', ARGV[i + 16],
      'fr', priority(tonumber(ARGV[i + 14]), reason, ls, ms))
    enqueued = 1
  elseif want ~= '' then
    local id = ARGV[i + 9]
    local p = priority(tonumber(ARGV[i + 14]), reason, ls, ms)
    local payload = want == 'full' and ARGV[i + 15] or ARGV[i + 16]
    fresh_store_sync(KEYS[1], KEYS[2], id, ARGV[i + 10], ARGV[i + 11], ARGV[i + 12],
      ARGV[i + 13], p, payload, member, now, woken)
    redis.call('HSET', fk, 'j', id, 'rb', reason, 'jt', ARGV[i + 8])
    enqueued = 1
  end
  local s = redis.call('HMGET', fk, 'ls', 'la', 'nf', 'le', 'nd', 'rb', 'j', 'fu')
  out[#out + 1] = {s[1] or '', s[2] or '', s[3] or '0', s[4] or '', s[5] or '', s[6] or '',
    s[7] or '', enqueued, s[8] or ''}
end
trim_events()
publish_all(ARGV[2], woken)
return out
