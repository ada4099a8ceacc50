-- _pausing.lua: paused queues (keys.py `paused`: queue -> paused_at), included by claim.lua
-- (takes no job of a paused queue) and enqueue.lua (hands none to an idle worker).
--@include _jobs
local function queue_paused(queue)
  return redis.call('HEXISTS', PREFIX .. 'paused', queue) == 1
end
