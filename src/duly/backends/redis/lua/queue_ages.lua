-- queue_ages.lua: when the longest-waiting claimable job of each queue became ready. Read-only.
--
-- KEYS[1] the `queues` set, only to route the call to the namespace's slot on a cluster (each
--   ready zset is built from the prefix)
-- ARGV[1] prefix   ARGV[2] budget: the most job hashes read per queue   ARGV[3..] queue names
-- Returns, per queue in ARGV order, the least max(enqueued_at, scheduled_for) among the jobs of
-- its ready zset (parked jobs are not in it), as stored (a string), or false if it is empty.
--
-- A ready zset is ordered by priority band, then by enqueued_at in ms (handed-back jobs, at ms
-- 0, first), not by ready time: a promoted job keeps its enqueue place. So each band is walked
-- in order and the walk stops at the first job enqueued no earlier than the best ready time
-- found, since its ready time cannot be less. A queue whose walk reaches the budget answers the
-- best ready time among the jobs read (so an age can only be under-stated, and only when more
-- than `budget` jobs were enqueued before the oldest one became ready).
--@include _jobs
local PAGE = 64
local budget = tonumber(ARGV[2])
local out = {}
for i = 3, #ARGV do
  local key = ready_key(ARGV[i])
  local best, best_raw = nil, false
  local reads = 0
  local from = '-inf'
  while reads < budget do
    local head = redis.call('ZRANGEBYSCORE', key, from, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
    if #head == 0 then break end
    local band = math.floor(tonumber(head[2]) / SPAN) * SPAN
    local band_end = string.format('%.0f', band + SPAN)
    local offset = 0
    local done = false
    while not done and reads < budget do
      local page = redis.call('ZRANGEBYSCORE', key, string.format('%.0f', band),
        '(' .. band_end, 'WITHSCORES', 'LIMIT', offset, PAGE)
      for j = 1, #page, 2 do
        local ms = tonumber(page[j + 1]) - band
        if best and ms > 0 and ms / 1000 >= best then
          done = true
          break
        end
        local f = redis.call('HMGET', job_key(page[j]), 'e', 'd')
        local raw = f[1]
        if f[2] and tonumber(f[2]) > tonumber(raw) then raw = f[2] end
        if not best or tonumber(raw) < best then best, best_raw = tonumber(raw), raw end
        reads = reads + 1
        if reads >= budget then break end
      end
      if #page < 2 * PAGE then done = true end
      offset = offset + PAGE
    end
    from = band_end
  end
  out[#out + 1] = best_raw
end
return out
