-- PostgreSQL named queries: a running job's progress and checkpoint. Conventions: README.md beside
-- this file.

-- name: store_progress
-- In the heartbeat's transaction: each run's latest progress and checkpoint (parallel arrays;
-- a NULL leaves that value as stored) on its job, if still running under %(worker)s; a new
-- progress appends a `progress` event (status 'running'). Returns: events (how many).
WITH r AS (
    SELECT * FROM unnest(%(ids)s::text[], %(progress)s::bytea[], %(cursors)s::bytea[])
        AS r(id, progress, cursor)
),
stored AS (
    UPDATE {schema}.jobs j
    SET progress = coalesce(r.progress, j.progress), cursor = coalesce(r.cursor, j.cursor)
    FROM r
    WHERE j.id = r.id AND j.status = 'running' AND j.worker = %(worker)s
    RETURNING j.id, j.task, j.queue, j.key, r.progress
),
evented AS (
    INSERT INTO {schema}.events (job_id, task, queue, key, status, progress)
    SELECT s.id, s.task, s.queue, s.key, 'running', s.progress
    FROM stored s WHERE s.progress IS NOT NULL ORDER BY s.id
    RETURNING 1
)
SELECT count(*) FROM evented;

-- name: progress_notify
-- After store_progress appended events (their ids drawn): notify the events channel if a
-- reader waits (the writers' side of migrations/0007_lean_event_triggers.sql).
SELECT pg_notify(left('duly_ev_' || %(schema_name)s, 63), '')
WHERE (SELECT w.last_value FROM {schema}.events_waited_until w)
      > extract(epoch FROM clock_timestamp()) * 1000;

-- Runtime schedules and skipped ticks (0014_schedules.sql).
