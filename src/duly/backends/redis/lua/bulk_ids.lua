-- bulk_ids.lua: the ids of the jobs matching a bulk action's filter, a page at a time, by
-- cursor (cancel_many / retry_many select their jobs with it). Read-only; ids only, never a
-- job's payload.
--
-- KEYS[1] the index: a score-0 zset in id order (`all`, k:<key>, s:<status>) walked newest
--         first when ARGV[2] is 'lex'; any zset of ids (`run`) walked by ZSCAN when 'scan'
-- ARGV[1] prefix   ARGV[2] 'lex' | 'scan'   ARGV[3] most ids returned
-- ARGV[4] most index entries examined   ARGV[5] status   ARGV[6] task   ARGV[7] queue
--         ('' = any)   ARGV[8] cursor ('' = from the start)
-- Returns {next cursor ('' = the index is exhausted), id, id, ...}.
--@include _jobs
local mode, limit, bound = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local want_status, want_task, want_queue = ARGV[5], ARGV[6], ARGV[7]
local cursor = ARGV[8]
local filtered = want_status ~= '' or want_task ~= '' or want_queue ~= ''
local out = {''}

local function matches(id)
  if not filtered then return redis.call('EXISTS', job_key(id)) == 1 end
  local f = redis.call('HMGET', job_key(id), 's', 't', 'q')
  if f[1] == false then return false end
  if want_status ~= '' and f[1] ~= want_status then return false end
  if want_task ~= '' and f[2] ~= want_task then return false end
  return want_queue == '' or f[3] == want_queue
end

if mode == 'scan' then
  -- ZSCAN returns every member present for the whole walk; one seen twice is skipped by the
  -- action (no longer in its status) or, running, only has its cancel requested again.
  local reply = redis.call('ZSCAN', KEYS[1], cursor == '' and '0' or cursor, 'COUNT', bound)
  local items = reply[2]
  for i = 1, #items, 2 do
    if matches(items[i]) then out[#out + 1] = items[i] end
  end
  out[1] = reply[1] == '0' and '' or reply[1]
  return out
end

local chunk = 256
local examined, found = 0, 0
local max = cursor == '' and '+' or ('(' .. cursor)
while examined < bound and found < limit do
  local n = math.min(chunk, bound - examined)
  local ids = redis.call('ZREVRANGEBYLEX', KEYS[1], max, '-', 'LIMIT', 0, n)
  for _, id in ipairs(ids) do
    examined = examined + 1
    max = '(' .. id
    if matches(id) then
      out[#out + 1] = id
      found = found + 1
      if found >= limit then break end
    end
  end
  if #ids < n and found < limit then return out end -- exhausted: cursor ''
end
out[1] = string.sub(max, 2)
return out
