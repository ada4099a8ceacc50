-- PostgreSQL named queries: reading jobs, queues and outcome counters. Conventions: README.md
-- beside this file.

-- name: get_job
SELECT {columns} FROM {schema}.jobs j WHERE j.id = %(id)s;

-- name: list_jobs
-- Newest first through the primary key (or jobs_status when a status is given).
SELECT {columns}
FROM {schema}.jobs j
WHERE j.id < %(before)s
  AND (%(status)s::text IS NULL OR j.status = %(status)s)
  AND (%(task)s::text IS NULL OR j.task = %(task)s)
  AND (%(queue)s::text IS NULL OR j.queue = %(queue)s)
ORDER BY j.id DESC
LIMIT %(limit)s;

-- name: list_jobs_by_key
-- One key's jobs only, newest first, through jobs_key.
SELECT {columns}
FROM {schema}.jobs j
WHERE j.key = %(key)s
  AND j.id < %(before)s
  AND (%(status)s::text IS NULL OR j.status = %(status)s)
  AND (%(task)s::text IS NULL OR j.task = %(task)s)
  AND (%(queue)s::text IS NULL OR j.queue = %(queue)s)
ORDER BY j.key DESC, j.id DESC
LIMIT %(limit)s;

-- name: queue_stats
WITH counts AS (
    SELECT j.queue,
           count(*) FILTER (WHERE j.status = 'queued') AS queued,
           count(*) FILTER (WHERE j.status IN ('scheduled', 'retrying')) AS scheduled,
           count(*) FILTER (WHERE j.status = 'running') AS running,
           count(*) FILTER (WHERE j.status = 'queued' AND j.parked) AS parked,
           min(greatest(j.enqueued_at, coalesce(j.scheduled_for, 0)))
               FILTER (WHERE j.status = 'queued' AND NOT j.parked) AS oldest_ready_at
    FROM {schema}.jobs j
    WHERE j.status IN ('scheduled', 'queued', 'running', 'retrying')
    GROUP BY j.queue
)
SELECT q.name,
       coalesce(c.queued, 0) AS queued,
       coalesce(c.scheduled, 0) AS scheduled,
       coalesce(c.running, 0) AS running,
       coalesce(c.parked, 0) AS parked,
       c.oldest_ready_at,
       q.paused_at IS NOT NULL AS paused
FROM {schema}.queues q
LEFT JOIN counts c ON c.queue = q.name
ORDER BY q.name;

-- name: stats
SELECT minute, task, queue, succeeded, failed, retried
FROM {schema}.stats
WHERE minute >= %(first_minute)s
ORDER BY minute, task, queue;


-- Groups and events (migration 0005_groups_events.sql writes them, in triggers on jobs).
