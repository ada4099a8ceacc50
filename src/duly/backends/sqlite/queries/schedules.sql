-- SQLite named queries: watches and runtime schedules, skipped ticks. Conventions: README.md beside
-- this file.

-- name: watch_holder
-- move: the active job holding a unique key (jobs_unique: one at most).
SELECT id, status, parked FROM jobs
WHERE unique_key = :key AND status IN ('scheduled', 'queued', 'running', 'retrying');

-- name: watch_move
-- move: the holder's next run at :at (a queued one waits `scheduled` again; promote queues it).
UPDATE jobs
SET status = CASE WHEN status = 'queued' THEN 'scheduled' ELSE status END, scheduled_for = :at
WHERE id = :id;

-- Progress and checkpoints (0012_progress.sql, duly.backends.progress).

-- name: schedule_exists
SELECT 1 FROM schedules WHERE name = :name;

-- name: put_schedule
-- An upsert: the row of that name replaced whole.
INSERT INTO schedules (name, task, queue, payload, priority, every, cron, tz, catch_up,
                       overlap, updated_at)
VALUES (:name, :task, :queue, :payload, :priority, :every, :cron, :tz, :catch_up, :overlap,
        :updated_at)
ON CONFLICT (name) DO UPDATE SET
    task = excluded.task, queue = excluded.queue, payload = excluded.payload,
    priority = excluded.priority, every = excluded.every, cron = excluded.cron,
    tz = excluded.tz, catch_up = excluded.catch_up, overlap = excluded.overlap,
    updated_at = excluded.updated_at;

-- name: delete_schedule
DELETE FROM schedules WHERE name = :name;

-- name: all_schedules
SELECT name, task, queue, payload, priority, every, cron, tz, catch_up, overlap, updated_at
FROM schedules ORDER BY name;

-- name: skip_tick
-- Counted once per tick: a tick no later than the one recorded changes nothing (no row).
INSERT INTO skipped_ticks (key, count, last_tick) VALUES (:key, 1, :tick)
ON CONFLICT (key) DO UPDATE SET count = count + 1, last_tick = excluded.last_tick
WHERE last_tick < excluded.last_tick
RETURNING 1;

-- name: skipped_ticks
SELECT key, count, last_tick FROM skipped_ticks;

-- Paused queues (0008_paused_queues.sql).
