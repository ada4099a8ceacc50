-- list_jobs.lua: read jobs matching a filter, newest (largest id) first. Read-only.
--
-- KEYS[1] the index to read: a score-0 zset in id order (`all`, k:<key>, s:<status>) when
--         ARGV[2] is 'lex', or any zset of ids (`run`) to be sorted here when it is 'sort'
-- ARGV[1] prefix   ARGV[2] 'lex' | 'sort'   ARGV[3] limit   ARGV[4] scan bound
-- ARGV[5] status   ARGV[6] task   ARGV[7] queue   ('' = any)
-- ARGV[8] before: only ids smaller than it ('' = no bound; a listing's next page)
-- Returns {id, HGETALL, id, HGETALL, ...}, at most `limit` jobs.
--
-- At most `scan bound` index entries are examined per call, so a filter that matches few of
-- the newest jobs returns what it found within the bound (documented in the backend).
--@include _jobs
local mode, limit, bound = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local want_status, want_task, want_queue = ARGV[5], ARGV[6], ARGV[7]
local before = ARGV[8]
local filtered = want_status ~= '' or want_task ~= '' or want_queue ~= ''
local out = {}
local found = 0

local function consider(id)
  local jk = job_key(id)
  if filtered then
    local f = redis.call('HMGET', jk, 's', 't', 'q')
    if f[1] == false then return end
    if want_status ~= '' and f[1] ~= want_status then return end
    if want_task ~= '' and f[2] ~= want_task then return end
    if want_queue ~= '' and f[3] ~= want_queue then return end
  end
  local fields = redis.call('HGETALL', jk)
  if #fields == 0 then return end
  out[#out + 1] = id
  out[#out + 1] = fields
  found = found + 1
end

if limit <= 0 then return out end
if mode == 'sort' then
  local ids = redis.call('ZRANGE', KEYS[1], 0, bound - 1)
  table.sort(ids, function(a, b) return a > b end)
  for _, id in ipairs(ids) do
    if before == '' or id < before then
      consider(id)
      if found >= limit then break end
    end
  end
else
  -- Walk the index newest first from `before`, a chunk at a time.
  local chunk = 256
  local examined = 0
  local max = before == '' and '+' or ('(' .. before)
  while found < limit and examined < bound do
    local n = math.min(chunk, bound - examined)
    local ids = redis.call('ZREVRANGEBYLEX', KEYS[1], max, '-', 'LIMIT', 0, n)
    for _, id in ipairs(ids) do
      consider(id)
      if found >= limit then break end
    end
    if #ids < n then break end
    examined = examined + n
    max = '(' .. ids[#ids]
  end
end
return out
