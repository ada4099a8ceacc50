-- PostgreSQL named queries: cancel, retry, pause and resume, bulk cancel and retry. Conventions:
-- README.md beside this file.

-- name: cancel
-- Locks the row first (FOR UPDATE reads its latest version, e.g. a job a claim just started),
-- so the caller learns the state it left. A parked job is unparked (parked implies queued).
-- A running job only gets the request: expire_at set (never set on a running job otherwise),
-- its status, lease and gate slot kept until its run ends (finish, recover: `stopped`).
-- Returns (when cancelled or requested): gate, was_running, was_waiting (queued and not
-- parked: it may have been the job a freed slot woke, whose turn must pass to the next parked
-- job).
WITH cur AS (
    SELECT j.id, j.status, j.parked
    FROM {schema}.jobs j
    WHERE j.id = %(id)s AND j.status IN ('scheduled', 'queued', 'running', 'retrying')
    FOR UPDATE
)
UPDATE {schema}.jobs j
SET status = CASE WHEN cur.status = 'running' THEN 'running' ELSE 'cancelled' END,
    finished_at = CASE WHEN cur.status = 'running' THEN NULL ELSE %(now)s END,
    lease_until = CASE WHEN cur.status = 'running' THEN j.lease_until END,
    expire_at = %(expire_at)s, parked = false
FROM cur
WHERE j.id = cur.id
RETURNING j.gate, cur.status = 'running', cur.status = 'queued' AND NOT cur.parked;

-- name: retry_take_over
-- First statement of an operator retry: a hold past its unique_expires_at (compared with
-- %(now)s) on the key of the job to retry is taken over, as enqueue does.
UPDATE {schema}.jobs h
SET unique_key = NULL
FROM {schema}.jobs j
WHERE j.id = %(id)s AND j.status IN ('failed', 'cancelled')
  AND (j.unique_expires_at IS NULL OR j.unique_expires_at > j.finished_at)
  AND h.unique_key = j.unique_key AND h.id <> j.id
  AND h.status IN ('scheduled', 'queued', 'running', 'retrying')
  AND h.unique_expires_at <= %(now)s;

-- name: retry
-- A failed or cancelled job becomes claimable now, with fresh attempts and its errors kept.
-- Its unique key (if its hold lasted until it finished) is taken again, unless another active
-- job holds it: then nothing changes. A hold that had expired before the job finished is gone:
-- the key is dropped and never refused. (A holder committed after this statement's snapshot
-- makes the UPDATE fail on jobs_unique; the caller reports that as a refusal too.)
-- Returns: retried (0 or 1), woken.
WITH again AS (
    UPDATE {schema}.jobs j
    SET status = 'queued', attempts = 0, lost = 0, finished_at = NULL, result = NULL,
        expire_at = NULL, worker = NULL, lease_until = NULL, rate_slot = NULL,
        position = %(now)s,
        expires_at = NULL,  -- an operator's retry runs the job, whatever its old expiry
        unique_key = CASE WHEN j.unique_expires_at <= j.finished_at THEN NULL
                          ELSE j.unique_key END
    WHERE j.id = %(id)s AND j.status IN ('failed', 'cancelled')
      AND NOT EXISTS (
          SELECT 1 FROM {schema}.jobs h
          WHERE h.unique_key = j.unique_key AND h.id <> j.id
            AND (j.unique_expires_at IS NULL OR j.unique_expires_at > j.finished_at)
            AND h.status IN ('scheduled', 'queued', 'running', 'retrying'))
      -- A dependent cancelled by a dependency runs when that one succeeds, not on its own.
      AND NOT EXISTS (
          SELECT 1 FROM {schema}.job_waits w WHERE w.job_id = j.id AND w.waiting > 0)
    RETURNING j.queue
)
SELECT (SELECT count(*) FROM again) AS retried,
       (SELECT count(pg_notify(%(channel)s, queue)) FROM again) AS woken;

-- name: pause_lock
-- First statement of a pause's transaction: the queue's advisory lock (see claim_lock),
-- exclusive: waits for the claims holding it, and later claims wait for this commit.
SELECT pg_advisory_xact_lock(
           (to_regclass(quote_ident(%(schema)s) || '.queues')::oid::bigint << 32)
           | (hashtext(%(queue)s)::bigint & 4294967295));

-- name: pause_queue
-- Marks the queue paused (a new row for a queue never enqueued to), after pause_lock in its
-- transaction. Returns a row only if it was not paused yet.
INSERT INTO {schema}.queues AS k (name, paused_at) VALUES (%(queue)s, %(now)s)
ON CONFLICT (name) DO UPDATE SET paused_at = excluded.paused_at WHERE k.paused_at IS NULL
RETURNING true AS paused;

-- name: resume_queue
-- Returns: resumed (0 or 1), the queue's workers notified.
WITH resumed AS (
    UPDATE {schema}.queues k SET paused_at = NULL
    WHERE k.name = %(queue)s AND k.paused_at IS NOT NULL
    RETURNING k.name
)
SELECT count(pg_notify(%(channel)s, name)) AS resumed FROM resumed;

-- name: paused_queues
SELECT name, paused_at FROM {schema}.queues WHERE paused_at IS NOT NULL ORDER BY name;


-- Bulk actions (duly.backends.bulk): `cancel` and `retry` over a batch, one statement each.

-- name: bulk_ids
-- A bulk action's page: the ids only (never a payload) of jobs in %(status)s below
-- %(before)s, newest first (keyset by id).
SELECT j.id
FROM {schema}.jobs j
WHERE j.status = %(status)s
  AND j.id < %(before)s
  AND (%(task)s::text IS NULL OR j.task = %(task)s)
  AND (%(queue)s::text IS NULL OR j.queue = %(queue)s)
  AND (%(key)s::text IS NULL OR j.key = %(key)s)
ORDER BY j.id DESC
LIMIT %(limit)s;

-- name: cancel_many
-- `cancel` for every id of %(ids)s (text[]) whose job is in %(status)s (an active status) when
-- its row is locked: FOR UPDATE re-reads a row changed meanwhile and skips it if it left that
-- status. Returns per job: gate, was_waiting (as `cancel`).
WITH cur AS (
    SELECT j.id, j.status, j.parked
    FROM {schema}.jobs j
    WHERE j.id = ANY(%(ids)s::text[]) AND j.status = %(status)s
      AND j.status IN ('scheduled', 'queued', 'running', 'retrying')
    ORDER BY j.id
    FOR UPDATE
)
UPDATE {schema}.jobs j
SET status = CASE WHEN cur.status = 'running' THEN 'running' ELSE 'cancelled' END,
    finished_at = CASE WHEN cur.status = 'running' THEN NULL ELSE %(now)s END,
    lease_until = CASE WHEN cur.status = 'running' THEN j.lease_until END,
    expire_at = %(expire_at)s, parked = false
FROM cur
WHERE j.id = cur.id
RETURNING j.gate, cur.status = 'queued' AND NOT cur.parked;

-- name: fresh_cancelled_many
-- After cancel_many, in its transaction: `fresh_cancelled` for each of %(ids)s.
UPDATE {schema}.freshness f
SET (last_error, job_id, follow_up) = (
        SELECT x.last_error, x.job_id, x.follow_up
        FROM {schema}.fresh_after(f, 'cancelled', NULL, NULL, %(now)s) x)
FROM {schema}.jobs j
WHERE f.job_id = ANY(%(ids)s::text[]) AND j.id = f.job_id AND j.status = 'cancelled';

-- name: retry_take_over_many
-- `retry_take_over` for every id of %(ids)s.
UPDATE {schema}.jobs h
SET unique_key = NULL
FROM {schema}.jobs j
WHERE j.id = ANY(%(ids)s::text[]) AND j.status = %(status)s
  AND (j.unique_expires_at IS NULL OR j.unique_expires_at > j.finished_at)
  AND h.unique_key = j.unique_key AND h.id <> j.id
  AND h.status IN ('scheduled', 'queued', 'running', 'retrying')
  AND h.unique_expires_at <= %(now)s;

-- name: retry_many
-- `retry` for every id of %(ids)s whose job is in %(status)s ('failed' or 'cancelled'). Two of
-- them taking the same unique key fail the statement on jobs_unique (the caller then retries
-- them one by one). Returns: retried, woken.
WITH again AS (
    UPDATE {schema}.jobs j
    SET status = 'queued', attempts = 0, lost = 0, finished_at = NULL, result = NULL,
        expire_at = NULL, worker = NULL, lease_until = NULL, rate_slot = NULL,
        position = %(now)s,
        expires_at = NULL,  -- an operator's retry runs the job, whatever its old expiry
        unique_key = CASE WHEN j.unique_expires_at <= j.finished_at THEN NULL
                          ELSE j.unique_key END
    WHERE j.id = ANY(%(ids)s::text[]) AND j.status = %(status)s
      AND j.status IN ('failed', 'cancelled')
      AND NOT EXISTS (
          SELECT 1 FROM {schema}.jobs h
          WHERE h.unique_key = j.unique_key AND h.id <> j.id
            AND (j.unique_expires_at IS NULL OR j.unique_expires_at > j.finished_at)
            AND h.status IN ('scheduled', 'queued', 'running', 'retrying'))
      -- A dependent cancelled by a dependency runs when that one succeeds, not on its own.
      AND NOT EXISTS (
          SELECT 1 FROM {schema}.job_waits w WHERE w.job_id = j.id AND w.waiting > 0)
    RETURNING j.queue
)
SELECT (SELECT count(*) FROM again) AS retried,
       (SELECT count(pg_notify(%(channel)s, q)) FROM (SELECT DISTINCT queue AS q FROM again) d)
           AS woken;
