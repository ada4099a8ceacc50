-- resume.lua: resume a paused queue and wake the workers waiting on it.
--
-- KEYS[1] paused hash   ARGV[1] prefix   ARGV[2] queue   ARGV[3] wake channel
-- Returns 1 if the queue was paused, else 0 (nothing published).
if redis.call('HDEL', KEYS[1], ARGV[2]) == 0 then return 0 end
redis.call('PUBLISH', ARGV[3], ARGV[2])
return 1
