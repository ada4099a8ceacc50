-- cancel_many.lua: cancel a batch of jobs (at most 1,000) in one script, each as cancel.lua
-- would, skipping a job that is no longer in ARGV[4] (it changed state meanwhile).
--
-- KEYS as cancel.lua   ARGV[1] prefix   ARGV[2] now   ARGV[3] expire_at ('' = never)
-- ARGV[4] the status each job must be in   ARGV[5] wake channel   ARGV[6..] job ids
-- Returns how many were cancelled (a running one: its cancel requested).
--@include _operator
local counts, woken = {}, {}
local n = 0
for i = 6, #ARGV do
  n = n + cancel_one(KEYS, ARGV[i], ARGV[2], ARGV[3], ARGV[4], counts, woken)
end
trim_events()
flush_counts(KEYS[4], counts)
publish_all(ARGV[5], woken)
return n
