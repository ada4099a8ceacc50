-- promote_due.lua: move scheduled/retrying jobs whose time has come to their ready queues.
--
-- KEYS[1] due zset   KEYS[2] queue counts
-- ARGV[1] prefix   ARGV[2] now   ARGV[3] limit   ARGV[4] wake channel
-- Returns {moved, earliest scheduled_for still in `due` as a string, or false if none}.
--
-- Reads only due entries (ZRANGEBYSCORE -inf now LIMIT 0 limit), so the cost never depends on
-- the number not yet due. Each becomes `queued` in its ready zset at its FIFO place (by
-- enqueued_at); an entry whose hash is not scheduled/retrying is a stale one and just dropped.
--@include _jobs
--@include _events
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[2], 'LIMIT', 0, tonumber(ARGV[3]))
local moved = 0
local counts = {}
local woken = {}
for _, id in ipairs(ids) do
  redis.call('ZREM', KEYS[1], id)
  local jk = job_key(id)
  local f = redis.call('HMGET', jk, 's', 'q', 'r', 'e', 't', 'k')
  if f[1] == 'scheduled' or f[1] == 'retrying' then
    local queue = f[2]
    redis.call('HSET', jk, 's', 'queued')
    redis.call('ZADD', ready_key(queue), fifo_score(f[3], f[4]), id)
    bump(counts, queue .. SEP .. 's', -1)
    woken[queue] = true
    emit(id, 'queued', f[5], queue, f[6])
    moved = moved + 1
  end
end
flush_counts(KEYS[2], counts)
trim_events()
publish_all(ARGV[4], woken)
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return {moved, first[2] or false}
