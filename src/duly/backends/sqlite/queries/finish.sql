-- SQLite named queries: recording outcomes (succeeded, failed, retry, release), unparking,
-- counters. Conventions: README.md beside this file.

-- name: finish_cancelled
-- A job whose cancel was requested while it ran ends cancelled, whatever its outcome; it keeps
-- the expire_at the cancel gave it.
WITH o(id, finished_at) AS (VALUES /* rows */)
UPDATE jobs
SET status = 'cancelled', finished_at = o.finished_at, lease_until = NULL, rate_slot = NULL
FROM o WHERE jobs.id = o.id;

-- name: finish_succeeded
WITH o(id, finished_at, result, expire_at) AS (VALUES /* rows */)
UPDATE jobs
SET status = 'succeeded', finished_at = o.finished_at, result = o.result,
    expire_at = o.expire_at, lease_until = NULL, rate_slot = NULL
FROM o WHERE jobs.id = o.id;

-- name: finish_failed
WITH o(id, finished_at, errors, expire_at) AS (VALUES /* rows */)
UPDATE jobs
SET status = 'failed', finished_at = o.finished_at, errors = o.errors, expire_at = o.expire_at,
    lease_until = NULL, rate_slot = NULL
FROM o WHERE jobs.id = o.id;

-- name: finish_retry
-- A failed attempt with attempts left: `retrying` until run_at (promote_due re-queues it).
WITH o(id, errors, run_at, expire_at) AS (VALUES /* rows */)
UPDATE jobs
SET status = 'retrying', errors = o.errors, scheduled_for = o.run_at, expire_at = o.expire_at,
    worker = NULL, lease_until = NULL, rate_slot = NULL
FROM o WHERE jobs.id = o.id;

-- name: finish_release_now
-- Handed back without charging the attempt: head of its queue (position below any real time).
-- It keeps the rate-limit slot it was deferred to, if any.
WITH o(id, rate_slot) AS (VALUES /* rows */)
UPDATE jobs
SET status = 'queued', attempts = max(attempts - 1, 0), position = enqueued_at - 1e12,
    worker = NULL, lease_until = NULL, rate_slot = o.rate_slot
FROM o WHERE jobs.id = o.id;

-- name: finish_release_later
WITH o(id, run_at, rate_slot) AS (VALUES /* rows */)
UPDATE jobs
SET status = 'scheduled', attempts = max(attempts - 1, 0), scheduled_for = o.run_at,
    worker = NULL, lease_until = NULL, rate_slot = o.rate_slot
FROM o WHERE jobs.id = o.id;

-- name: finish_again
-- The run succeeded and the job runs once more at run_at (queued at the tail if already due),
-- as new: attempts and lost back to 0. It stays active, so it keeps its unique hold.
WITH o(id, now, run_at, result) AS (VALUES /* rows */)
UPDATE jobs
SET status = iif(o.run_at <= o.now, 'queued', 'scheduled'), result = o.result,
    scheduled_for = o.run_at, position = o.run_at, attempts = 0, lost = 0,
    worker = NULL, lease_until = NULL, rate_slot = NULL
FROM o WHERE jobs.id = o.id;

-- name: unpark
-- A slot of :gate freed (a job left running, or a gated job was cancelled): put back in their
-- queues the best parked jobs of the gate (jobs_parked order), as many as it has free slots by
-- :gate_limit (the limit carried by the job that freed it). Run after the transaction's other
-- changes, so the running count is final; it returns the queues to wake.
UPDATE jobs SET parked = 0
WHERE id IN (
    SELECT id FROM jobs INDEXED BY jobs_parked
    WHERE gate = :gate AND parked = 1
    ORDER BY priority DESC, position, id
    LIMIT max(0, :gate_limit - (SELECT count(*) FROM jobs INDEXED BY jobs_gate
                                WHERE gate = :gate AND status = 'running'))
)
RETURNING queue;

-- name: bump_stats
-- Add to one (minute, task, queue) counter bucket; run in the transaction that applied them.
INSERT INTO stats (minute, task, queue, succeeded, failed, retried)
VALUES (:minute, :task, :queue, :succeeded, :failed, :retried)
ON CONFLICT (minute, task, queue) DO UPDATE SET
    succeeded = succeeded + excluded.succeeded,
    failed = failed + excluded.failed,
    retried = retried + excluded.retried;
