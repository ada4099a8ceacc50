-- SQLite named queries: cancel, retry, pause and resume, bulk cancel and retry. Conventions:
-- README.md beside this file.

-- name: cancel
-- A waiting job (parked or not) becomes cancelled; its gate (if any) is returned so its turn
-- passes on to a parked job. A running job only gets the request: expire_at set (never set on
-- a running job otherwise), the status kept until its run ends (finish_cancelled, cancel_lost).
-- SET reads the row as it was; RETURNING the row as it is: running = the job was running.
UPDATE jobs
SET status = iif(status = 'running', 'running', 'cancelled'),
    finished_at = iif(status = 'running', NULL, :now),
    lease_until = iif(status = 'running', lease_until, NULL),
    expire_at = :expire_at, parked = 0
WHERE id = :id AND status IN ('scheduled', 'queued', 'running', 'retrying')
RETURNING gate, gate_limit, status = 'running';

-- name: retry_candidate
-- retry: a failed/cancelled job's unique key, if its hold had not ended before it finished.
SELECT iif(unique_expires_at IS NULL OR unique_expires_at > finished_at, unique_key, NULL)
FROM jobs WHERE id = :id AND status IN ('failed', 'cancelled');

-- name: retry
-- Re-queue a failed/cancelled job at the tail of its queue with fresh attempts; errors kept.
-- :unique_key is the key it takes again (see retry_candidate), or NULL; an old rate-limit slot
-- is not kept for a run that starts anew.
UPDATE jobs
SET status = 'queued', attempts = 0, lost = 0, finished_at = NULL, result = NULL,
    expire_at = NULL, worker = NULL, lease_until = NULL, position = :now,
    unique_key = :unique_key, rate_slot = NULL,
    expires_at = NULL  -- an operator's retry runs the job, whatever its old expiry
WHERE id = :id AND status IN ('failed', 'cancelled')
  -- A dependent cancelled by a dependency runs when that one succeeds, not on its own.
  AND NOT EXISTS (SELECT 1 FROM job_waits w WHERE w.job_id = :id AND w.waiting > 0);

-- name: pause_queue
INSERT INTO paused_queues (queue, paused_at) VALUES (:queue, :now)
ON CONFLICT (queue) DO NOTHING;

-- name: resume_queue
DELETE FROM paused_queues WHERE queue = :queue;

-- name: paused_queues
SELECT queue, paused_at FROM paused_queues ORDER BY queue;

-- Bulk actions (duly.backends.bulk).

-- name: bulk_ids
-- A bulk action's page: the ids only (never a payload) of jobs in :status below :before,
-- newest first, through the jobs_status index.
SELECT id FROM jobs INDEXED BY jobs_status
WHERE status = :status
  AND id < :before
  AND (:task IS NULL OR task = :task)
  AND (:queue IS NULL OR queue = :queue)
  AND (:key IS NULL OR key = :key)
ORDER BY id DESC
LIMIT :limit;

-- name: bulk_candidates
-- The ids of a batch (JSON array) whose job is in :status now, in id order.
SELECT id FROM jobs WHERE id IN (SELECT value FROM json_each(:ids)) AND status = :status
ORDER BY id;
