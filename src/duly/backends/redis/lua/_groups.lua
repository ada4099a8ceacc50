-- _groups.lua: duly groups (PRODUCT §8), settled as their members end.
--@include _jobs
--@include _events
--
-- Groups (keys.py, "Groups"): g:<id> hash {n total, left, succeeded, failed, cancelled, at
-- created, ret retention s, k key, cb '1' with a callback, done completed_at, f first
-- completed_at, nm name, m member ids (named groups)}; gs:<id> the set of members whose
-- current outcome is counted; gn:<name> the id of the stored group of that name. A member
-- job's `gp` field names its group.
local function group_key(id) return PREFIX .. 'g:' .. id end
local function group_settled_key(id) return PREFIX .. 'gs:' .. id end
local function group_name_key(name) return PREFIX .. 'gn:' .. name end

-- Member `id` of `group` reached `status` (succeeded, failed or cancelled) at `now`. Its
-- outcome counts once while it lasts (SADD; unsettle_member takes it back); the one that leaves
-- none pending completes the group (done = now, kept `ret` seconds more, its name too) and,
-- the first time only (`f`), makes its callback job (id = the group's) `queued` at its FIFO
-- place, its queue woken (`woken`). A member of a group already deleted counts nowhere.
local function settle_member(group, id, status, now, woken)
  local gk = group_key(group)
  -- A group past its retention is gone: a member outliving it (a later retry) counts nowhere.
  if redis.call('EXISTS', gk) == 0 then return end
  if redis.call('SADD', group_settled_key(group), id) == 0 then return end
  redis.call('HINCRBY', gk, status, 1)
  if redis.call('HINCRBY', gk, 'left', -1) > 0 then return end
  redis.call('HSET', gk, 'done', now)
  local f = redis.call('HMGET', gk, 'ret', 'cb', 'nm')
  local ttl = math.ceil(tonumber(f[1]) or 86400)
  redis.call('EXPIRE', gk, ttl)
  redis.call('EXPIRE', group_settled_key(group), ttl)
  if f[3] then redis.call('EXPIRE', group_name_key(f[3]), ttl) end
  if redis.call('HSETNX', gk, 'f', now) == 0 then return end -- completed before: fired then
  if not f[2] then return end
  local cj = job_key(group)
  local c = redis.call('HMGET', cj, 's', 'd', 'q', 'r', 'e', 't', 'k')
  if c[1] == 'scheduled' and not c[2] then
    redis.call('HSET', cj, 's', 'queued', 'd', now)
    redis.call('ZADD', ready_key(c[3]), fifo_score(c[4], c[5]), group)
    redis.call('HINCRBY', PREFIX .. 'qc', c[3] .. SEP .. 's', -1)
    woken[c[3]] = true
    emit(group, 'queued', c[6], c[3], c[7])
  end
end

-- Member `id` of `group`, whose outcome was `status`, runs again (an operator retry): its
-- outcome is no longer counted, the group is pending again (no `done`) and kept until it
-- completes again (its keys lose their expiry).
local function unsettle_member(group, id, status)
  local gk = group_key(group)
  if redis.call('EXISTS', gk) == 0 then return end
  if redis.call('SREM', group_settled_key(group), id) == 0 then return end
  redis.call('HINCRBY', gk, status, -1)
  redis.call('HINCRBY', gk, 'left', 1)
  redis.call('HDEL', gk, 'done')
  redis.call('PERSIST', gk)
  redis.call('PERSIST', group_settled_key(group))
  local name = redis.call('HGET', gk, 'nm')
  if name then redis.call('PERSIST', group_name_key(name)) end
end
