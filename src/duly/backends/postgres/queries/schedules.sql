-- PostgreSQL named queries: watches and runtime schedules, skipped ticks. Conventions: README.md
-- beside this file.

-- name: watch_move
-- The active job holding a unique key (jobs_unique: one at most), locked; moved to run at
-- %(at)s unless it runs, is parked, or is queued and due already. Returns the holder as it
-- was (id, status, parked), or no row.
WITH holder AS (
    SELECT j.id, j.status, j.parked
    FROM {schema}.jobs j
    WHERE j.unique_key = %(key)s AND j.status IN ('scheduled', 'queued', 'running', 'retrying')
    FOR UPDATE
),
moved AS (
    UPDATE {schema}.jobs j
    SET status = CASE WHEN j.status = 'queued' THEN 'scheduled' ELSE j.status END,
        scheduled_for = %(at)s
    FROM holder h
    WHERE j.id = h.id AND h.status <> 'running' AND NOT h.parked
      AND NOT (h.status = 'queued' AND %(at)s <= %(now)s)
    RETURNING j.id
)
SELECT h.id, h.status, h.parked, (SELECT count(*) FROM moved) FROM holder h;

-- Progress and checkpoints (0016_progress.sql, duly.backends.progress).

-- name: put_schedule
-- An upsert: the row of that name replaced whole. Returns whether it is new (xmax = 0: the
-- row was inserted, not updated).
INSERT INTO {schema}.schedules (name, task, queue, payload, priority, every, cron, tz,
                                catch_up, overlap, updated_at)
VALUES (%(name)s, %(task)s, %(queue)s, %(payload)s, %(priority)s, %(every)s, %(cron)s,
        %(tz)s, %(catch_up)s, %(overlap)s, %(updated_at)s)
ON CONFLICT (name) DO UPDATE SET
    task = excluded.task, queue = excluded.queue, payload = excluded.payload,
    priority = excluded.priority, every = excluded.every, cron = excluded.cron,
    tz = excluded.tz, catch_up = excluded.catch_up, overlap = excluded.overlap,
    updated_at = excluded.updated_at
RETURNING (xmax = 0) AS inserted;

-- name: delete_schedule
DELETE FROM {schema}.schedules WHERE name = %(name)s
RETURNING 1;

-- name: all_schedules
SELECT name, task, queue, payload, priority, every, cron, tz, catch_up, overlap, updated_at
FROM {schema}.schedules ORDER BY name;

-- name: skip_tick
-- Counted once per tick: a tick no later than the one recorded changes nothing (no row).
INSERT INTO {schema}.skipped_ticks AS s (key, count, last_tick)
VALUES (%(key)s, 1, %(tick)s)
ON CONFLICT (key) DO UPDATE SET count = s.count + 1, last_tick = excluded.last_tick
WHERE s.last_tick < excluded.last_tick
RETURNING 1;

-- name: skipped_ticks
SELECT key, count, last_tick FROM {schema}.skipped_ticks;

-- Paused queues (0012_paused_queues.sql).
