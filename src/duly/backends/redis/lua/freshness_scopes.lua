-- freshness_scopes.lua: list scopes. Three modes (ARGV[2]):
--   'count':  how many scopes of freshness ARGV[3] have stale_at <= ARGV[4] (fs:<name>).
--   'scopes': the scopes of freshness ARGV[3] by stale_at (fs:<name>), earliest first; with
--             ARGV[5] = '1' only those with stale_at <= ARGV[4] (now); at most ARGV[6].
--   'due':    up to ARGV[6] scopes of freshness ARGV[3] whose next_due <= ARGV[4] (fd:<name>),
--             earliest first.
-- KEYS[1] fs:<name>, only to route the call to the namespace's cluster slot (every key is
-- built from the prefix; keys.py)
-- ARGV[1] prefix
-- Returns 'scopes': per scope {scope, ms, ls, la, nf, le, nd, rb, j} ('' = none);
--         'due': the scopes.
--@include _jobs
--@include _freshness
local mode, name, now, limit = ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[6])
if mode == 'count' then
  return redis.call('ZCOUNT', fresh_index(name), '-inf', now)
end
if mode == 'due' then
  return redis.call('ZRANGEBYSCORE', fresh_due_key(name), '-inf', now, 'LIMIT', 0, limit)
end
local top = ARGV[5] == '1' and now or '+inf'
local scopes = redis.call('ZRANGEBYSCORE', fresh_index(name), '-inf', top, 'LIMIT', 0, limit)
local out = {}
for _, scope in ipairs(scopes) do
  local s = redis.call('HMGET', fresh_key(name .. SEP .. scope),
    'ms', 'ls', 'la', 'nf', 'le', 'nd', 'rb', 'j')
  out[#out + 1] = {scope, s[1] or '', s[2] or '', s[3] or '', s[4] or '0', s[5] or '',
    s[6] or '', s[7] or '', s[8] or ''}
end
return out
