-- Named queries of the SQLite backend (parsed by duly.backends._sql.load_queries).
--
-- Every write query runs inside one BEGIN IMMEDIATE transaction opened by SqliteBackend, so a
-- state change is atomic and two processes never act on the same row: BEGIN IMMEDIATE takes the
-- database's single write lock before the first read, and the partial indexes of
-- migrations/0001_initial.sql keep each hot statement proportional to the rows it changes.
-- Hot statements name their index (INDEXED BY): without ANALYZE statistics SQLite may pick
-- another index, and a plan must never depend on how many rows are not due/running/expired.
-- Lists of ids are passed as one JSON array parameter and read with json_each(), so a batch is
-- one statement, not N round trips. Rows are read by column name (_rows.py): a job's columns keep
-- their JobRecord field names (a computed one is aliased), listed in JobRecord field order (the
-- codec then reads them as one slice).

-- name: migrations_table
CREATE TABLE IF NOT EXISTS duly_migrations (
    version    INTEGER PRIMARY KEY,
    title      TEXT NOT NULL,
    applied_at REAL NOT NULL
);

-- name: migrations_table_exists
SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'duly_migrations';

-- name: migrations_applied
SELECT version FROM duly_migrations ORDER BY version;

-- name: migration_record
INSERT INTO duly_migrations (version, title, applied_at) VALUES (:version, :title, :applied_at);

-- name: ping
SELECT count(*) FROM duly_migrations;

-- name: data_version
PRAGMA data_version;

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

-- name: rate_states
-- reserve_rate: the stored GCRA state of the keys (JSON array).
SELECT key, tat, not_before FROM rate_limits WHERE key IN (SELECT value FROM json_each(:keys));

-- name: rate_store
INSERT INTO rate_limits (key, tat, not_before) VALUES (:key, :tat, :not_before)
ON CONFLICT (key) DO UPDATE SET tat = excluded.tat, not_before = excluded.not_before;

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

-- name: group_members
-- In the enqueue_group transaction, after the jobs: mark the members (ids: a JSON list).
UPDATE jobs SET group_id = :group WHERE id IN (SELECT value FROM json_each(:ids));

-- name: group_callback_waits
-- The callback was inserted `scheduled` for +inf: no due time at all from now on.
UPDATE jobs SET scheduled_for = NULL, position = enqueued_at WHERE id = :group;

-- name: insert_group
-- :members is the JSON list of the member ids for a named group, else NULL (0007).
INSERT INTO groups (id, key, created_at, total, pending, retention, has_callback, name, members)
VALUES (:id, :key, :created_at, :total, :total, :retention, :has_callback, :name, :members);

-- name: group_named
-- enqueue_group, before storing anything: the stored group of this name, with its members.
SELECT id, members FROM groups WHERE name = :name;

-- name: get_group
-- By id, or by name (a name never has the form of a generated id: duly._groups refuses it).
SELECT id, key, created_at, total, succeeded, failed, cancelled, completed_at, has_callback,
       first_completed_at, name
FROM groups WHERE id = :id
UNION ALL
SELECT id, key, created_at, total, succeeded, failed, cancelled, completed_at, has_callback,
       first_completed_at, name
FROM groups WHERE name = :id
LIMIT 1;

-- name: events_head
SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0);

-- name: events_trimmed_upto
SELECT upto FROM event_trim;

-- name: events_after
SELECT id, job_id, task, queue, key, status, at, progress FROM events
WHERE id > :after ORDER BY id LIMIT :limit;

-- name: key_events_after
SELECT id, job_id, task, queue, key, status, at, progress FROM events INDEXED BY events_key
WHERE key = :key AND id > :after ORDER BY key, id LIMIT :limit;

-- name: key_events_newest
SELECT coalesce(max(id), 0) FROM events INDEXED BY events_key WHERE key = :key;

-- name: events_trim_bound
-- Purge: the highest id to delete: beyond the newest :keep_count, or older than :keep_age
-- seconds by the database clock (the first row young enough bounds it: ids follow time), at
-- most :limit rows past the oldest.
SELECT min(
    max(
        (SELECT coalesce(max(id), 0) FROM events) - :keep_count,
        coalesce((SELECT id FROM events
                  WHERE at >= (julianday('now') - 2440587.5) * 86400.0 - :keep_age
                  ORDER BY id LIMIT 1) - 1,
                 (SELECT coalesce(max(id), 0) FROM events))
    ),
    (SELECT coalesce(min(id), 0) FROM events) + :limit
);

-- name: events_trim
DELETE FROM events WHERE id <= :upto;

-- name: events_trim_mark
UPDATE event_trim SET upto = max(upto, :upto);

-- name: purge_groups
-- Groups complete for longer than their retention, with their counted members.
DELETE FROM group_settled
WHERE group_id IN (SELECT id FROM groups INDEXED BY groups_expire WHERE expire_at <= :now);
DELETE FROM groups WHERE expire_at <= :now;


-- Webhooks (0005_webhooks.sql).

-- name: insert_webhook
INSERT INTO webhooks (digest, task, queue, payload, key, priority, delay, created_at)
VALUES (:digest, :task, :queue, :payload, :key, :priority, :delay, :created_at)
ON CONFLICT (digest) DO NOTHING;

-- name: get_webhook
SELECT digest, task, queue, payload, key, priority, delay, created_at
FROM webhooks WHERE digest = :digest;

-- name: delete_webhook
DELETE FROM webhooks WHERE digest = :digest;

-- Dependencies (duly.backends.dependencies, migrations/0011_dependencies.sql: the triggers
-- release and cancel dependents; these store them and read).

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

-- name: watch_holder
-- move: the active job holding a unique key (jobs_unique: one at most).
SELECT id, status, parked FROM jobs
WHERE unique_key = :key AND status IN ('scheduled', 'queued', 'running', 'retrying');

-- name: watch_move
-- move: the holder's next run at :at (a queued one waits `scheduled` again; promote queues it).
UPDATE jobs
SET status = CASE WHEN status = 'queued' THEN 'scheduled' ELSE status END, scheduled_for = :at
WHERE id = :id;

-- Progress and checkpoints (0012_progress.sql, duly.backends.progress).

-- name: progress_event
-- A `progress` event for a new progress of a job still running under :worker (before
-- store_progress, in the heartbeat's transaction): status 'running', the progress carried.
INSERT INTO events (job_id, task, queue, key, status, at, progress)
SELECT id, task, queue, key, status, (julianday('now') - 2440587.5) * 86400.0, :progress
FROM jobs
WHERE id = :id AND status = 'running' AND worker = :worker AND :progress IS NOT NULL;

-- name: store_progress
-- A run's latest progress and checkpoint on its job, if still running under :worker; a NULL
-- leaves that value as stored.
UPDATE jobs
SET progress = coalesce(:progress, progress), cursor = coalesce(:cursor, cursor)
WHERE id = :id AND status = 'running' AND worker = :worker;

-- Runtime schedules and skipped ticks (0010_schedules.sql).

-- name: schedule_exists
SELECT 1 FROM schedules WHERE name = :name;

-- name: put_schedule
-- An upsert: the row of that name replaced whole.
INSERT INTO schedules (name, task, queue, payload, priority, every, cron, tz, catch_up,
                       overlap, updated_at)
VALUES (:name, :task, :queue, :payload, :priority, :every, :cron, :tz, :catch_up, :overlap,
        :updated_at)
ON CONFLICT (name) DO UPDATE SET
    task = excluded.task, queue = excluded.queue, payload = excluded.payload,
    priority = excluded.priority, every = excluded.every, cron = excluded.cron,
    tz = excluded.tz, catch_up = excluded.catch_up, overlap = excluded.overlap,
    updated_at = excluded.updated_at;

-- name: delete_schedule
DELETE FROM schedules WHERE name = :name;

-- name: all_schedules
SELECT name, task, queue, payload, priority, every, cron, tz, catch_up, overlap, updated_at
FROM schedules ORDER BY name;

-- name: skip_tick
-- Counted once per tick: a tick no later than the one recorded changes nothing (no row).
INSERT INTO skipped_ticks (key, count, last_tick) VALUES (:key, 1, :tick)
ON CONFLICT (key) DO UPDATE SET count = count + 1, last_tick = excluded.last_tick
WHERE last_tick < excluded.last_tick
RETURNING 1;

-- name: skipped_ticks
SELECT key, count, last_tick FROM skipped_ticks;

-- Paused queues (0008_paused_queues.sql).

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
