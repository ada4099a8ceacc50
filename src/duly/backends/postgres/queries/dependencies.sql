-- PostgreSQL named queries: jobs that wait for others (after=, chains). Conventions: README.md
-- beside this file.

-- name: dependency_lock
-- First statement of enqueue_after: the stored dependencies, locked FOR SHARE in id order, so
-- none ends (its trigger would miss the rows this transaction adds) before it commits; with
-- their depth (1: a job that waits for none).
SELECT j.id, coalesce(w.depth, 1) FROM {schema}.jobs j
LEFT JOIN {schema}.job_waits w ON w.job_id = j.id
WHERE j.id = ANY(%(ids)s::text[])
ORDER BY j.id
FOR SHARE OF j;

-- name: dependency_wait
-- After `enqueue` stored the dependents `scheduled` for +inf, all of them in one statement (the
-- ids, pipe_froms and depths in step; a link per (link_after, link_job) pair): their links,
-- and each one's row (its dependencies not succeeded yet, its chain input if that one
-- succeeded already, the first one already failed or cancelled); then queued at once (none
-- waiting), cancelled at once (a dependency failed or was cancelled: as the trigger would
-- have), or left waiting with no due time. One that waits for another of them cancelled here
-- is cancelled by the trigger at the end of this statement, as it would have been later.
-- Returns their status and queue.
WITH links AS (
    INSERT INTO {schema}.job_after (after_id, job_id)
    SELECT DISTINCT l.after_id, l.job_id
    FROM unnest(%(link_after)s::text[], %(link_job)s::text[]) AS l(after_id, job_id)
    ON CONFLICT DO NOTHING
    RETURNING 1
),
deps AS (
    SELECT DISTINCT l.job_id, d.id, d.task, d.status, d.result
    FROM unnest(%(link_after)s::text[], %(link_job)s::text[]) AS l(after_id, job_id)
    JOIN {schema}.jobs d ON d.id = l.after_id
),
cause AS (
    SELECT DISTINCT ON (d.job_id) d.job_id, d.id, d.task, d.status FROM deps d
    WHERE d.status IN ('failed', 'cancelled') ORDER BY d.job_id, d.id
),
wait AS (
    INSERT INTO {schema}.job_waits
        (job_id, waiting, pipe_from, input, failed_by, retention, depth)
    SELECT n.id,
           (SELECT count(*) FROM deps d WHERE d.job_id = n.id AND d.status <> 'succeeded'),
           n.pipe_from,
           (SELECT d.result FROM deps d
            WHERE d.job_id = n.id AND d.id = n.pipe_from AND d.status = 'succeeded'),
           (SELECT c.id FROM cause c WHERE c.job_id = n.id),
           %(retention)s,
           n.depth
    FROM unnest(%(ids)s::text[], %(pipes)s::text[], %(depths)s::integer[])
         AS n(id, pipe_from, depth)
    RETURNING job_id, waiting, failed_by
)
UPDATE {schema}.jobs j
SET status = CASE WHEN w.waiting = 0 THEN 'queued'
                  WHEN w.failed_by IS NOT NULL THEN 'cancelled'
                  ELSE j.status END,
    scheduled_for = CASE WHEN w.waiting = 0 THEN j.enqueued_at END,
    position = CASE WHEN w.waiting = 0 THEN j.enqueued_at ELSE j.position END,
    finished_at = CASE WHEN w.waiting > 0 AND w.failed_by IS NOT NULL THEN %(now)s END,
    expire_at = CASE WHEN w.waiting > 0 AND w.failed_by IS NOT NULL
                     THEN %(now)s + %(retention)s END,
    unique_key = CASE WHEN w.waiting > 0 AND w.failed_by IS NOT NULL THEN NULL
                      ELSE j.unique_key END,
    errors = CASE WHEN w.waiting > 0 AND w.failed_by IS NOT NULL THEN
        convert_to(jsonb_build_array(jsonb_build_object(
            'type', 'DependencyFailed',
            'message', 'dependency ' || c.id || ' (' || c.task || ') '
                       || CASE WHEN c.status = 'failed' THEN 'failed' ELSE 'was cancelled' END,
            'traceback', '',
            'at', %(now)s::double precision,
            'attempt', 0))::text, 'UTF8')
        ELSE j.errors END
FROM wait w LEFT JOIN cause c ON c.job_id = w.job_id, (SELECT count(*) FROM links) AS linked
WHERE j.id = w.job_id
RETURNING j.status, j.queue;

-- name: dependents
SELECT a.job_id FROM {schema}.job_after a WHERE a.after_id = %(id)s ORDER BY a.job_id;

-- name: dependency_input
SELECT w.input FROM {schema}.job_waits w WHERE w.job_id = %(id)s;

-- name: dependency_wake
-- enqueue_after: a dependent queued at once wakes its queue's workers.
SELECT pg_notify(%(channel)s, %(queue)s);


-- Watches (backends/watches.py).
