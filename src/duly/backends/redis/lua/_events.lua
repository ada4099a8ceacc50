-- _events.lua: the event streams (keys.py, "Events").
--@include _jobs
--
-- Every job state change is one event, numbered 1, 2, 3... across the namespace (`ev:n` holds the
-- last number). A script collects its events (emit) and writes them at its end (trim_events): one
-- `ev` stream entry per EVENTS_PER_ENTRY events, whose id is 0-<number of its last event>, with
-- fields n (how many; absent = 1, the one-call enqueue's entry, 2 bytes less), a (server time,
-- ms) and e (the events as one msgpack array: job id, status code, task, queue, key or '' for
-- each), so a burst of jobs costs one XADD per script call, not one per job. The status is its
-- code (STATUS_CODE: a one-byte integer instead of the name, ~6 bytes less per event). The events
-- of jobs with a key also go, per key, to ev:k:<key> under the same entry id (fields a, e:
-- number, job id, status code, task, queue for each), which lives KEY_EVENTS_TTL seconds after
-- its last entry. Retention: entries whose last event is below (last number - EVENTS_KEPT) are
-- trimmed (~: whole nodes), and purge trims by age; a reader compares its position with the first
-- event still stored. Entries written before (status names, `n` always) read the same
-- (_events.py).
local EVENTS_KEPT = 100000
local EVENTS_PER_ENTRY = 1000
local KEY_EVENTS_TTL = 604800
-- Mirrors records.STATUSES (1-based), read back by _events.py.
local STATUS_CODE = {scheduled = 1, queued = 2, running = 3, retrying = 4, succeeded = 5,
  failed = 6, cancelled = 7}
local pending_events = {}
local pending_count = 0
local pending_keyed = false
local function emit(id, status, task, queue, key)
  local e, b = pending_events, pending_count * 5
  pending_count = pending_count + 1
  if key and key ~= '' then pending_keyed = true else key = '' end
  e[b + 1], e[b + 2], e[b + 3], e[b + 4], e[b + 5] = id, STATUS_CODE[status], task, queue, key
end
-- A `progress` event (duly.backends.progress): a `running` event whose status slot holds the
-- progress JSON (a string starting with `{`) instead of the status code.
local function emit_progress(id, progress, task, queue, key)
  emit(id, 'running', task, queue, key)
  pending_events[pending_count * 5 - 3] = progress
end
local function trim_events()
  local e, count = pending_events, pending_count
  if count == 0 then return end
  local t = redis.call('TIME')
  local ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local last = redis.call('INCRBY', PREFIX .. 'ev:n', count)
  local number = last - count
  for first = 1, count, EVENTS_PER_ENTRY do
    local n = math.min(EVENTS_PER_ENTRY, count - first + 1)
    local entry, keyed = e, {}
    if count > EVENTS_PER_ENTRY then
      entry = {unpack(e, (first - 1) * 5 + 1, (first + n - 1) * 5)}
    end
    for x = first, pending_keyed and first + n - 1 or 0 do
      local b = (x - 1) * 5
      local key = e[b + 5]
      if key ~= '' then
        local k = keyed[key]
        if k == nil then k = {}; keyed[key] = k end
        k[#k + 1], k[#k + 2], k[#k + 3], k[#k + 4], k[#k + 5] =
          number + x - first + 1, e[b + 1], e[b + 2], e[b + 3], e[b + 4]
      end
    end
    number = number + n
    local eid = '0-' .. number
    if n == 1 then
      redis.call('XADD', PREFIX .. 'ev', eid, 'a', ms, 'e', cmsgpack.pack(entry))
    else
      redis.call('XADD', PREFIX .. 'ev', eid, 'n', n, 'a', ms, 'e', cmsgpack.pack(entry))
    end
    for key, k in pairs(keyed) do
      local kk = PREFIX .. 'ev:k:' .. key
      redis.call('XADD', kk, eid, 'a', ms, 'e', cmsgpack.pack(k))
      redis.call('EXPIRE', kk, KEY_EVENTS_TTL)
      if last > EVENTS_KEPT then
        redis.call('XTRIM', kk, 'MINID', '~', '0-' .. (last - EVENTS_KEPT))
      end
    end
  end
  if last > EVENTS_KEPT then
    redis.call('XTRIM', PREFIX .. 'ev', 'MINID', '~', '0-' .. (last - EVENTS_KEPT))
  end
  pending_events, pending_count, pending_keyed = {}, 0, false
end

