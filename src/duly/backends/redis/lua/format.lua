-- format.lua: read the storage format of a namespace's data, and record a newer one (_migrate.py).
--
-- KEYS[1] format (string: the format number)
-- KEYS[2] all, KEYS[3] queues (only looked at: does the namespace hold data?)
-- ARGV[1] readable: the newest format the calling duly reads and writes
-- ARGV[2] 'open': read, and record `readable` in a namespace holding nothing (there is
--         nothing to convert); 'peek': only read; else a number: the format the caller's
--         format steps brought the data to, recorded unless a higher one is already
-- Returns the format stored before the call: the key's number; else 1 when the namespace
-- holds data (written by duly 0.1.0, before formats were recorded); else 0 (nothing stored).
--
-- Invariant: the recorded format never goes down, so two processes upgrading at once (each
-- running the same idempotent steps) end at the same number, and a duly that reads less
-- never writes over a newer format ('open' writes only into an empty namespace).
local stored = tonumber(redis.call('GET', KEYS[1]))
if not stored then
  if redis.call('EXISTS', KEYS[2], KEYS[3]) > 0 then
    stored = 1
  else
    stored = 0
  end
end
local readable = tonumber(ARGV[1])
if ARGV[2] == 'open' then
  if stored == 0 then
    redis.call('SET', KEYS[1], readable)
  end
elseif ARGV[2] ~= 'peek' and tonumber(ARGV[2]) > stored then
  redis.call('SET', KEYS[1], ARGV[2])
end
return stored
