-- SQLite named queries: due jobs promoted, lost jobs recovered, worker registry, retention purge.
-- Conventions: README.md beside this file.

-- name: promote_due
-- Move up to :limit due scheduled/retrying jobs to their queue, ordered by due time (jobs_due
-- index: reads only the due rows). They queue by the time they became due.
UPDATE jobs SET status = 'queued', position = scheduled_for
WHERE id IN (
    SELECT id FROM jobs INDEXED BY jobs_due
    WHERE status IN ('scheduled', 'retrying') AND scheduled_for <= :now
    ORDER BY scheduled_for
    LIMIT :limit
);

-- name: next_due
SELECT min(scheduled_for) FROM jobs INDEXED BY jobs_due
WHERE status IN ('scheduled', 'retrying');

-- name: lapsed
-- recover: running jobs whose lease lapsed before :now, oldest lease first (jobs_lease index),
-- with expire_at (set: a cancel was requested, see cancel).
SELECT id, task, queue, lost, gate, gate_limit, expire_at FROM jobs INDEXED BY jobs_lease
WHERE status = 'running' AND lease_until < :now
ORDER BY lease_until
LIMIT :limit;

-- name: requeue_lost
-- recover below max_lost: head of its queue, worker cleared, attempts kept.
UPDATE jobs
SET status = 'queued', lost = lost + 1, position = enqueued_at - 1e12,
    worker = NULL, lease_until = NULL, rate_slot = NULL
WHERE id = :id;

-- name: cancel_lost
-- recover of a job whose cancel was requested: cancelled (never requeued), lost unchanged.
UPDATE jobs
SET status = 'cancelled', finished_at = :now, lease_until = NULL, rate_slot = NULL
WHERE id = :id;

-- name: quarantine_lost
-- recover at max_lost: failed, with a LostWorker error appended to the JSON history (a
-- history that is not valid JSON is replaced rather than blocking the recovery).
UPDATE jobs
SET status = 'failed', lost = lost + 1, finished_at = :now, expire_at = :expire_at,
    lease_until = NULL, rate_slot = NULL,
    errors = CAST(json_insert(
        CASE WHEN json_valid(CAST(errors AS TEXT)) AND json_type(CAST(errors AS TEXT)) = 'array'
             THEN CAST(errors AS TEXT) ELSE '[]' END,
        '$[#]',
        json_object('type', 'LostWorker', 'message', :message, 'traceback', '',
                    'at', :now, 'attempt', attempts)
    ) AS BLOB)
WHERE id = :id;

-- name: register_worker
INSERT INTO workers (id, started_at, last_seen, info) VALUES (:worker, :now, :now, :info)
ON CONFLICT (id) DO UPDATE SET
    started_at = excluded.started_at, last_seen = excluded.last_seen, info = excluded.info;

-- name: unregister_worker
DELETE FROM workers WHERE id = :worker;

-- name: list_workers
SELECT id, started_at, last_seen, info FROM workers ORDER BY id;

-- name: purge_jobs
-- Retention: finished jobs whose expire_at passed, oldest first (jobs_expire index).
DELETE FROM jobs
WHERE id IN (
    SELECT id FROM jobs INDEXED BY jobs_expire
    WHERE expire_at <= :now AND status IN ('succeeded', 'failed', 'cancelled')
    ORDER BY expire_at
    LIMIT :limit
);

-- name: purge_stats
DELETE FROM stats WHERE minute < :minute;

-- name: purge_workers
-- Workers that died without unregistering (SIGKILL, lost machine) and were not seen for 24 h.
DELETE FROM workers WHERE last_seen < :cutoff;

-- name: purge_rates
-- Rate-limit keys whose tat has passed: equivalent to no state (one row per live key).
DELETE FROM rate_limits WHERE tat <= :now;

-- name: drop
DELETE FROM events;
DELETE FROM group_settled;
DELETE FROM groups;
DELETE FROM jobs;
DELETE FROM stats;
DELETE FROM workers;
DELETE FROM queues;
DELETE FROM rate_limits;
DELETE FROM webhooks;
DELETE FROM paused_queues;
DELETE FROM schedules;
DELETE FROM skipped_ticks;


-- Groups and events (0004_groups_events.sql does the writing, in triggers).
