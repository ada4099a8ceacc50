-- SQLite named queries: storing jobs: ids already stored, unique holds, queues, debounce.
-- Conventions: README.md beside this file.

-- name: existing_ids
-- Which of the ids (JSON array) are already stored: enqueue reports them as deduplicated.
SELECT id FROM jobs WHERE id IN (SELECT value FROM json_each(:ids));

-- name: insert_job
-- A unique job is inserted only once unique_holder found its key free, under the same write
-- lock; jobs_unique still refuses a second active holder should that ever be skipped.
INSERT INTO jobs (
    id, task, queue, payload, status, attempts, max_attempts, key, priority,
    enqueued_at, scheduled_for, lost, position,
    unique_key, unique_until, unique_expires_at, gate, gate_limit, expires_at
) VALUES (
    :id, :task, :queue, :payload, :status, 0, :max_attempts, :key, :priority,
    :enqueued_at, :scheduled_for, 0, :position,
    :unique_key, :unique_until, :unique_expires_at, :gate, :gate_limit, :expires_at
)
ON CONFLICT (id) DO NOTHING;

-- name: unique_holder
-- The active job holding :unique_key (jobs_unique index), and when its hold expires.
SELECT id, unique_expires_at FROM jobs INDEXED BY jobs_unique
WHERE unique_key = :unique_key AND status IN ('scheduled', 'queued', 'running', 'retrying');

-- name: drop_unique_hold
-- A hold taken over after its expiry: the old holder runs on without its key.
UPDATE jobs SET unique_key = NULL WHERE id = :id;

-- name: insert_queue
INSERT INTO queues (name) VALUES (:name) ON CONFLICT (name) DO NOTHING;

-- name: debounce
-- enqueue of a debounced unique job (NewJob.debounce) whose key :id holds: the holder, if still
-- waiting (scheduled, or queued parked or not), takes the new job's payload and due time and
-- is scheduled again; a running one is not touched. SET reads the row as it was, RETURNING as it
-- is: gate, gate_limit (the caller read with debounce_ready whether it was ready: queued, not
-- parked, so that its gate turn passes on).
UPDATE jobs
SET payload = :payload, scheduled_for = :scheduled_for, position = :scheduled_for,
    status = 'scheduled', parked = 0
WHERE id = :id AND status IN ('scheduled', 'queued')
RETURNING gate, gate_limit;

-- name: debounce_ready
-- debounce, first: whether the holder is ready (queued and not parked).
SELECT status = 'queued' AND parked = 0 FROM jobs WHERE id = :id;
