-- SQLite named queries: reading jobs, queues and outcome counters. Conventions: README.md beside
-- this file.

-- name: get_job
SELECT id, task, queue, payload, status, attempts, max_attempts, key, priority,
       enqueued_at, scheduled_for, started_at, finished_at, result, errors, worker,
       lease_until, lost, expire_at, rate_slot, progress, cursor, expires_at
FROM jobs WHERE id = :id;

-- name: list_jobs_by_key
-- One key's jobs, newest first, through the jobs_key index only.
SELECT id, task, queue, payload, status, attempts, max_attempts, key, priority,
       enqueued_at, scheduled_for, started_at, finished_at, result, errors, worker,
       lease_until, lost, expire_at, rate_slot, progress, cursor, expires_at
FROM jobs INDEXED BY jobs_key
WHERE key = :key
  AND id < :before
  AND (:status IS NULL OR status = :status)
  AND (:task IS NULL OR task = :task)
  AND (:queue IS NULL OR queue = :queue)
ORDER BY id DESC
LIMIT :limit;

-- name: list_jobs_by_status
-- One state's jobs, newest first, through the jobs_status index.
SELECT id, task, queue, payload, status, attempts, max_attempts, key, priority,
       enqueued_at, scheduled_for, started_at, finished_at, result, errors, worker,
       lease_until, lost, expire_at, rate_slot, progress, cursor, expires_at
FROM jobs INDEXED BY jobs_status
WHERE status = :status
  AND id < :before
  AND (:task IS NULL OR task = :task)
  AND (:queue IS NULL OR queue = :queue)
ORDER BY id DESC
LIMIT :limit;

-- name: list_jobs
-- Any state: walks the primary key newest first, filtering as it goes.
SELECT id, task, queue, payload, status, attempts, max_attempts, key, priority,
       enqueued_at, scheduled_for, started_at, finished_at, result, errors, worker,
       lease_until, lost, expire_at, rate_slot, progress, cursor, expires_at
FROM jobs
WHERE id < :before
  AND (:task IS NULL OR task = :task)
  AND (:queue IS NULL OR queue = :queue)
ORDER BY id DESC
LIMIT :limit;

-- name: queue_names
SELECT name FROM queues ORDER BY name;

-- name: queue_counts
-- Active jobs per (queue, status): reads only active rows of the jobs_status index. Queued
-- rows also give how many are parked and when the longest-waiting claimable one became ready.
SELECT queue, status, count(*), sum(parked),
       min(CASE WHEN parked = 0 THEN max(enqueued_at, coalesce(scheduled_for, 0)) END)
FROM jobs
WHERE status IN ('scheduled', 'queued', 'running', 'retrying')
GROUP BY queue, status;

-- name: stats_since
SELECT minute, task, queue, succeeded, failed, retried FROM stats
WHERE minute >= :minute
ORDER BY minute, task, queue;
