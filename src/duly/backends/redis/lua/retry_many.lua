-- retry_many.lua: re-queue a batch of failed or cancelled jobs (at most 1,000) in one script,
-- each as retry.lua would, skipping a job that is no longer in ARGV[3] (it changed state
-- meanwhile) or whose unique key another active job holds.
--
-- KEYS as retry.lua   ARGV[1] prefix   ARGV[2] now   ARGV[3] 'failed' or 'cancelled'
-- ARGV[4] wake channel   ARGV[5..] job ids
-- Returns how many were re-queued.
--@include _operator
local woken = {}
local n = 0
for i = 5, #ARGV do
  n = n + retry_one(KEYS, ARGV[i], ARGV[2], ARGV[3], woken)
end
trim_events()
publish_all(ARGV[4], woken)
return n
