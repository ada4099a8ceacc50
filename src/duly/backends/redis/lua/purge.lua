-- purge.lua: delete finished jobs past their expire_at, and counter buckets older than 24 h.
--
-- KEYS[1] expiry zset   KEYS[2] all-jobs index   KEYS[3] counter minutes zset
-- KEYS[4] workers zset  KEYS[5] worker info hash
-- ARGV[1] prefix   ARGV[2] now   ARGV[3] limit
-- ARGV[4] counter cutoff: buckets whose minute is < this value are deleted
-- ARGV[5] worker cutoff: workers last seen before this time are forgotten (they died without
--         unregistering), at most 1000 per call
-- ARGV[6] events age (s): `ev` entries older than that by the server's clock are trimmed (the
--         count bound is kept by each writer, see _events.lua)
-- Returns the number of jobs deleted.
--
-- Takes up to `limit` ids of `exp` with expire_at <= now. A job that is still finished is
-- deleted with every index entry (s:<status>, `all`, its key index); an entry whose job is no
-- longer finished (re-queued by retry.lua, which also clears it) is just dropped from `exp`.
-- Counter buckets: at most 1500 per call (a day has 1440 minutes). A finished job never has a
-- `u` entry (finishing ended its hold) and rate-limit state (rl:<key>) expires by itself when its
-- tat passes (reserve_rate.lua), so neither needs work here.
--@include _jobs
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[2], 'LIMIT', 0, tonumber(ARGV[3]))
local deleted = 0
for _, id in ipairs(ids) do
  redis.call('ZREM', KEYS[1], id)
  local jk = job_key(id)
  local f = redis.call('HMGET', jk, 's', 'k', 'dh')
  local status, key = f[1], f[2]
  if status == 'succeeded' or status == 'failed' or status == 'cancelled' then
    redis.call('DEL', jk)
    redis.call('ZREM', status_key(status), id)
    redis.call('ZREM', KEYS[2], id)
    if key then redis.call('ZREM', key_index(key), id) end
    if f[3] then redis.call('DEL', PREFIX .. 'da:' .. id) end -- its dependents' set
    deleted = deleted + 1
  end
end
local minutes = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', '(' .. ARGV[4], 'LIMIT', 0, 1500)
for _, minute in ipairs(minutes) do
  redis.call('DEL', PREFIX .. 'c:' .. minute)
  redis.call('ZREM', KEYS[3], minute)
end
local gone = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', '(' .. ARGV[5], 'LIMIT', 0, 1000)
for _, worker in ipairs(gone) do
  redis.call('ZREM', KEYS[4], worker)
  redis.call('HDEL', KEYS[5], worker)
end
-- Events older than ARGV[6] seconds (entry field `a`, the server clock): found from the
-- oldest entry, at most 100 entries looked at per call, trimmed exactly (MINID).
local t = redis.call('TIME')
local cutoff = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  - math.floor(tonumber(ARGV[6]) * 1000)
local keep = nil
local oldest = redis.call('XRANGE', PREFIX .. 'ev', '-', '+', 'COUNT', 100)
for _, entry in ipairs(oldest) do
  local fields, at = entry[2], nil
  for i = 1, #fields, 2 do
    if fields[i] == 'a' then at = tonumber(fields[i + 1]) end
  end
  keep = entry[1]
  if at and at >= cutoff then break end
  keep = '(' .. entry[1]
end
if keep and string.sub(keep, 1, 1) == '(' then
  -- Every entry looked at is old: trim through the last of them.
  redis.call('XTRIM', PREFIX .. 'ev', 'MINID', string.sub(keep, 2))
  redis.call('XDEL', PREFIX .. 'ev', string.sub(keep, 2))
elseif keep then
  redis.call('XTRIM', PREFIX .. 'ev', 'MINID', keep)
end
return deleted
