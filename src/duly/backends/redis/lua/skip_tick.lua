-- skip_tick.lua: record that a schedule skipped a tick (overlap="skip"), once per tick.
--
-- KEYS[1] skipped-ticks hash (`sk`): schedule's job key -> "<count> <latest tick>"
-- ARGV[1] the schedule's job key   ARGV[2] the tick (seconds)
-- Returns 1 if counted, 0 if a tick as late or later was recorded already (another
-- scheduler's, or a resend of this call).
local v = redis.call('HGET', KEYS[1], ARGV[1])
local count = 0
if v then
  local space = string.find(v, ' ', 1, true)
  count = tonumber(string.sub(v, 1, space - 1))
  if tonumber(string.sub(v, space + 1)) >= tonumber(ARGV[2]) then return 0 end
end
redis.call('HSET', KEYS[1], ARGV[1], (count + 1) .. ' ' .. ARGV[2])
return 1
