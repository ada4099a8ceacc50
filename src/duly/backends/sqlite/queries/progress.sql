-- SQLite named queries: a running job's progress and checkpoint. Conventions: README.md beside this
-- file.

-- name: progress_event
-- A `progress` event for a new progress of a job still running under :worker (before
-- store_progress, in the heartbeat's transaction): status 'running', the progress carried.
INSERT INTO events (job_id, task, queue, key, status, at, progress)
SELECT id, task, queue, key, status, (julianday('now') - 2440587.5) * 86400.0, :progress
FROM jobs
WHERE id = :id AND status = 'running' AND worker = :worker AND :progress IS NOT NULL;

-- name: store_progress
-- A run's latest progress and checkpoint on its job, if still running under :worker; a NULL
-- leaves that value as stored.
UPDATE jobs
SET progress = coalesce(:progress, progress), cursor = coalesce(:cursor, cursor)
WHERE id = :id AND status = 'running' AND worker = :worker;

-- Runtime schedules and skipped ticks (0010_schedules.sql).
