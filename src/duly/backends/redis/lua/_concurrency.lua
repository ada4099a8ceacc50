-- _concurrency.lua: gates (a running set and a parked zset per gate) and rate-limit slots
-- (keys.py, "Gates", "Rate limits").
--@include _jobs
local function gate_running_key(gate) return PREFIX .. 'gr:' .. gate end
local function gate_parked_key(gate) return PREFIX .. 'gw:' .. gate end
local function rate_key(key) return PREFIX .. 'rl:' .. key end

-- Moves the best parked job of `gate` (if any) back to its ready zset with the score it was
-- parked with. Counts (the parked count of its queue) go to `counts`, its queue to `woken` (to
-- publish).
local function unpark(gate, counts, woken)
  local parked = redis.call('ZPOPMIN', gate_parked_key(gate))
  if #parked == 0 then return end
  local queue = redis.call('HGET', job_key(parked[1]), 'q')
  redis.call('ZADD', ready_key(queue), parked[2], parked[1])
  bump(counts, queue .. SEP .. 'w', -1)
  woken[queue] = true
end

-- Job `id` of `gate` left `running`: its slot frees, and the best parked job takes its turn.
local function free_gate(gate, id, counts, woken)
  redis.call('SREM', gate_running_key(gate), id)
  unpark(gate, counts, woken)
end

