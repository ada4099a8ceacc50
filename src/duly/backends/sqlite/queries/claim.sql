-- SQLite named queries: taking ready jobs (expiry at claim, gates, rate slots) and renewing leases.
-- Conventions: README.md beside this file.

-- name: claim
-- Take up to :limit queued jobs of one queue in claim order (jobs_claim index) and start them,
-- parking instead each one whose gate is full: one statement for both, in which a plain job
-- (gate NULL) skips every count. A gated candidate is taken if its gate's running jobs
-- (jobs_gate; those taken earlier in this claim included) plus its rank among this statement's
-- candidates of the gate (the ready jobs of the gate up to it: all of them are candidates, as
-- candidates are a prefix of the queue) stay within its gate_limit. `verdicts` is materialized,
-- so every count is read before any row changes. A parked row is returned with status 'queued'.
-- A job whose unique hold ends at start (unique_until = 'start') drops its key here; a job
-- past its expiry (expires_at <= :now) is never a candidate (claim_expired ends it, or a later
-- claim does past the cap), and a started one loses its expiry.
-- RETURNING order is unspecified, so `position` is returned too and the caller sorts; `gate`
-- tells the caller whether the queue still holds gated jobs (else the fast path will do).
-- RETURNING yields REAL columns holding whole numbers as integers (SQLite stores them so), hence
-- the CASTs that keep every time a float as in JobRecord.
WITH considered AS (
    -- A job that already lost a worker (lost > 0) may be a poison pill: it is taken only alone,
    -- as the first job of a claim (:may_lead = 1), and nothing after it is considered.
    SELECT id, gate, gate_limit, priority, position FROM (
        SELECT id, gate, gate_limit, priority, position,
               ROW_NUMBER() OVER claim_order AS rn,
               SUM(lost > 0) OVER (claim_order ROWS UNBOUNDED PRECEDING) AS tainted
        FROM (
            SELECT id, lost, gate, gate_limit, priority, position FROM jobs INDEXED BY jobs_claim
            WHERE status = 'queued' AND parked = 0 AND queue = :queue
              AND (expires_at IS NULL OR expires_at > :now)  -- an expired job never starts
            ORDER BY priority DESC, position, id
            LIMIT :limit
        )
        WINDOW claim_order AS (ORDER BY priority DESC, position, id)
    )
    WHERE tainted = 0 OR (rn = 1 AND :may_lead)
),
verdicts AS MATERIALIZED (
    -- The rank is two range counts, not a window partitioned by gate (whose sort every claim
    -- would pay): each reads only index entries ahead of the candidate, so at most :limit.
    SELECT c.id,
           CASE WHEN c.gate IS NULL THEN 1
                ELSE (SELECT count(*) FROM jobs AS ahead INDEXED BY jobs_claim
                      WHERE ahead.status = 'queued' AND ahead.parked = 0
                        AND ahead.queue = :queue AND ahead.priority > c.priority
                        AND ahead.gate = c.gate
                        AND (ahead.expires_at IS NULL OR ahead.expires_at > :now))
                   + (SELECT count(*) FROM jobs AS ahead INDEXED BY jobs_claim
                      WHERE ahead.status = 'queued' AND ahead.parked = 0
                        AND ahead.queue = :queue AND ahead.priority = c.priority
                        AND (ahead.position, ahead.id) <= (c.position, c.id)
                        AND ahead.gate = c.gate
                        AND (ahead.expires_at IS NULL OR ahead.expires_at > :now))
                   + (SELECT count(*) FROM jobs AS running INDEXED BY jobs_gate
                      WHERE running.gate = c.gate AND running.status = 'running')
                   <= c.gate_limit
           END AS take
    FROM considered AS c
)
UPDATE jobs
SET status = iif(take, 'running', 'queued'),
    parked = NOT take,
    attempts = attempts + take,
    started_at = iif(take, :now, started_at),
    worker = iif(take, :worker, worker),
    lease_until = iif(take, :lease_until, lease_until),
    finished_at = iif(take, NULL, finished_at),
    unique_key = iif(take AND unique_until = 'start', NULL, unique_key),
    -- The expiry is about a job that never started: once started, a way back to queued (an
    -- operator retry, a recovery, a release) must not end it as "never run".
    expires_at = iif(take, NULL, expires_at)
FROM verdicts
WHERE jobs.id = verdicts.id
RETURNING id, task, queue, payload, status, attempts, max_attempts, key, priority,
          CAST(enqueued_at AS REAL) AS enqueued_at, CAST(scheduled_for AS REAL) AS scheduled_for,
          CAST(started_at AS REAL) AS started_at, CAST(finished_at AS REAL) AS finished_at,
          result, errors, worker, CAST(lease_until AS REAL) AS lease_until, lost,
          CAST(expire_at AS REAL) AS expire_at, CAST(rate_slot AS REAL) AS rate_slot,
          progress, cursor, CAST(expires_at AS REAL) AS expires_at, position, gate;

-- name: claim_expired
-- claim, first: the queued jobs of one queue whose expiry has passed (jobs_expiring), parked or
-- not; the claim ends each as cancel does (then expired_error). At most 100 a claim (the
-- write lock is held): the claim statements leave out every expired job, so the cap only bounds
-- the cleanup, never lets an expired job start.
SELECT id FROM jobs INDEXED BY jobs_expiring
WHERE queue = :queue AND expires_at IS NOT NULL AND status = 'queued' AND expires_at <= :now
ORDER BY expires_at
LIMIT 100;

-- name: expired_error
-- claim: a job claim_expired found, just cancelled: its JobExpired error appended to the JSON
-- history (a history that is not valid JSON is replaced).
UPDATE jobs
SET errors = CAST(json_insert(
        CASE WHEN json_valid(CAST(errors AS TEXT)) AND json_type(CAST(errors AS TEXT)) = 'array'
             THEN CAST(errors AS TEXT) ELSE '[]' END,
        '$[#]',
        json_object('type', 'JobExpired', 'message', :message, 'traceback', '',
                    'at', :now, 'attempt', attempts)
    ) AS BLOB)
WHERE id = :id
RETURNING id, task, queue, payload, status, attempts, max_attempts, key, priority,
          enqueued_at, scheduled_for, started_at, finished_at, result, errors, worker,
          lease_until, lost, expire_at, rate_slot, progress, cursor, expires_at;

-- name: claim_candidates
-- claim's fast path: the first :limit ready jobs of one queue in claim order (jobs_claim index),
-- their JobRecord columns, gate and the database's data_version (see wait_for_work), read
-- in the claim's transaction. If none has a gate, the backend starts them with claim_start (the
-- rule for a job that lost a worker before applied in Python); else it runs claim instead.
SELECT id, task, queue, payload, status, attempts, max_attempts, key, priority,
       enqueued_at, scheduled_for, started_at, finished_at, result, errors, worker,
       lease_until, lost, expire_at, rate_slot, progress, cursor, expires_at, gate,
       (SELECT data_version FROM pragma_data_version) AS data_version
FROM jobs INDEXED BY jobs_claim
WHERE status = 'queued' AND parked = 0 AND queue = :queue
  AND (expires_at IS NULL OR expires_at > :now)  -- an expired job never starts
ORDER BY priority DESC, position, id
LIMIT :limit;

-- name: claim_start
-- claim's fast path: start the ready plain jobs whose ids (JSON array) claim_candidates read, as
-- claim does with the jobs it takes.
UPDATE jobs
SET status = 'running',
    attempts = attempts + 1,
    started_at = :now,
    worker = :worker,
    lease_until = :lease_until,
    finished_at = NULL,
    unique_key = iif(unique_until = 'start', NULL, unique_key),
    expires_at = NULL  -- started: its expiry no longer applies (see claim)
WHERE id IN (SELECT value FROM json_each(:ids));

-- name: touch_worker
-- Heartbeat: the worker is alive (re-registers it if its row was removed).
INSERT INTO workers (id, started_at, last_seen, info) VALUES (:worker, :now, :now, '{}')
ON CONFLICT (id) DO UPDATE SET last_seen = excluded.last_seen;

-- name: extend_leases
-- Heartbeat: extend the leases of the given jobs (JSON array) still running under :worker;
-- expire_at is set on those whose cancel was requested (see cancel): the worker must stop them.
UPDATE jobs SET lease_until = :lease_until
WHERE id IN (SELECT value FROM json_each(:ids))
  AND status = 'running' AND worker = :worker
RETURNING id, expire_at;

-- name: running_under
-- finish: which of the ids (JSON array) still run under :worker (only those outcomes apply), with
-- their task, queue, gate, gate_limit and expire_at (set: a cancel was requested): one row
-- holding a JSON array of [id, task, queue, gate, gate_limit, expire_at] (one row to fetch,
-- not one per job).
SELECT json_group_array(json_array(id, task, queue, gate, gate_limit, expire_at)) FROM jobs
WHERE id IN (SELECT value FROM json_each(:ids))
  AND status = 'running' AND worker = :worker;

-- The finish_* statements apply one kind of outcome to a batch of jobs that running_under found
-- running under the worker: `o` holds one row per job, bound in order, and the backend writes
-- as many `(?, ...)` rows as it binds in place of /* rows */ (padding with all-NULL rows, which
-- match no job, so a few texts serve every batch size; see SqliteBackend._apply).

-- name: rate_states
-- reserve_rate: the stored GCRA state of the keys (JSON array).
SELECT key, tat, not_before FROM rate_limits WHERE key IN (SELECT value FROM json_each(:keys));

-- name: rate_store
INSERT INTO rate_limits (key, tat, not_before) VALUES (:key, :tat, :not_before)
ON CONFLICT (key) DO UPDATE SET tat = excluded.tat, not_before = excluded.not_before;
