-- reserve_rate.lua: reserve one rate-limit slot per request, in order (GCRA).
--
-- KEYS[1] the first request's rl:<key>, only to route the call to the namespace's cluster slot
-- (every rl:<key> string is built from the prefix; keys.py)
-- ARGV[1] prefix   ARGV[2] now
-- ARGV[3..] four per request: key, interval (s), burst, not_before
-- Returns one start time per request, as a string ('%.17g', so it reads back exactly).
--
-- A key stores "<tat> <floor>": tat, the theoretical arrival time of its next slot, and floor,
-- the latest not_before pushed on it (no slot starts before it; floor <= tat). No state means
-- tat = now, floor = 0. For each request, with tolerance = (burst - 1) * interval:
-- floor = max(floor, not_before); tat = max(tat, now, floor); the slot starts at
-- max(now, floor, tat - tolerance); the key stores tat + interval. So `burst` slots start at
-- once, then one per interval, and a pushed schedule starts at floor with its whole burst (the
-- requests after it need not repeat not_before). The key expires (PX) when the stored tat
-- passes, measured from the caller's `now`: passed state (floor included) equals none, so it
-- vanishes by itself and purge has nothing to do for rate limits.
--@include _jobs
--@include _concurrency
local now = tonumber(ARGV[2])
local out = {}
for i = 3, #ARGV, 4 do
  local rk = rate_key(ARGV[i])
  local interval, burst = tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2])
  local stored_tat, floor = string.match(redis.call('GET', rk) or '', '^(%S+) (%S+)$')
  floor = math.max(tonumber(floor) or 0, tonumber(ARGV[i + 3]))
  local tat = math.max(tonumber(stored_tat) or now, now, floor)
  local start = math.max(now, floor, tat - math.max(burst - 1, 0) * interval)
  tat = tat + interval
  local ttl = math.ceil((tat - now) * 1000)
  if ttl > 0 then
    redis.call('SET', rk, string.format('%.17g %.17g', tat, floor), 'PX', ttl)
  else
    redis.call('DEL', rk)
  end
  out[#out + 1] = string.format('%.17g', start)
end
return out
