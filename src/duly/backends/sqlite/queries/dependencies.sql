-- SQLite named queries: jobs that wait for others (after=, chains). Conventions: README.md beside
-- this file.

-- name: dependency_depths
-- The stored ones of the ids (JSON array), with their depth (1: a job that waits for none).
SELECT j.id, coalesce(w.depth, 1) FROM jobs j LEFT JOIN job_waits w ON w.job_id = j.id
WHERE j.id IN (SELECT value FROM json_each(:ids));

-- name: dependency_links
INSERT INTO job_after (after_id, job_id)
SELECT DISTINCT value, :id FROM json_each(:after) WHERE true
ON CONFLICT (after_id, job_id) DO NOTHING;

-- name: dependency_wait
-- A dependent's row: its dependencies not succeeded yet, its chain input if that dependency
-- already succeeded, and the first dependency already failed or cancelled (else NULL).
INSERT INTO job_waits (job_id, waiting, pipe_from, input, failed_by, retention, depth)
SELECT :id,
       (SELECT count(*) FROM job_after a JOIN jobs d ON d.id = a.after_id
        WHERE a.job_id = :id AND d.status <> 'succeeded'),
       :pipe_from,
       (SELECT d.result FROM jobs d WHERE d.id = :pipe_from AND d.status = 'succeeded'),
       (SELECT d.id FROM job_after a JOIN jobs d ON d.id = a.after_id
        WHERE a.job_id = :id AND d.status IN ('failed', 'cancelled') ORDER BY d.id LIMIT 1),
       :retention, :depth
RETURNING waiting, failed_by;

-- name: dependency_hold
-- A new dependent that waits: no due time (it was inserted `scheduled`, so its event says so).
UPDATE jobs SET scheduled_for = NULL WHERE id = :id;

-- name: dependency_ready
-- A new dependent whose dependencies all succeeded already: queued at once.
UPDATE jobs SET status = 'queued', scheduled_for = enqueued_at, position = enqueued_at
WHERE id = :id;

-- name: dependency_cancel
-- A new dependent whose dependency :cause already failed or was cancelled: cancelled at once,
-- as jobs_dependency_failed does (releasable by that dependency's later success).
UPDATE jobs
SET status = 'cancelled', finished_at = :now, unique_key = NULL, expire_at = :now + :retention,
    scheduled_for = NULL,
    errors = CAST(json_array(json_object(
        'type', 'DependencyFailed',
        'message', (SELECT 'dependency ' || d.id || ' (' || d.task || ') '
                           || iif(d.status = 'failed', 'failed', 'was cancelled')
                    FROM jobs d WHERE d.id = :cause),
        'traceback', '', 'at', :now, 'attempt', 0)) AS BLOB)
WHERE id = :id;

-- name: dependents
SELECT job_id FROM job_after WHERE after_id = :id ORDER BY job_id;

-- name: dependency_input
SELECT input FROM job_waits WHERE job_id = :id;


-- Watches (backends/watches.py).
