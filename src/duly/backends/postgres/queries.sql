-- Named queries of the PostgreSQL backend (parsed by duly.backends._sql.load_queries).
--
-- Substitution: before use, PostgresBackend replaces exactly two tokens in every query, once,
-- when the backend is built:
--   {schema}   the schema name quoted by psycopg.sql.Identifier (never raw user text);
--   {columns}  the JobRecord columns, in JobRecord field order, of the table aliased `j`.
-- Everything else is plain SQL with psycopg named parameters `%(name)s`, or `%(name)b` to send
-- a parameter in binary format (the enqueue arrays: 3-4x cheaper to parse than array literals);
-- a literal percent sign would be written `%%`. Queries are schema-qualified instead of relying on search_path so the
-- same text runs on the caller's own connection (transactional enqueue) unchanged.
--
-- Invariants kept by every query below:
--   * each one is ONE statement, hence one transaction: a crash between two lines of Python
--     never leaves a half-applied state change;
--   * rows are taken with FOR UPDATE SKIP LOCKED and re-checked by status (and worker), so two
--     workers never get the same job and an outcome never applies to a recovered/cancelled job;
--   * a state change that may make a job claimable calls pg_notify(%(channel)s, queue) once per
--     queue; PostgreSQL delivers it at commit (and never on rollback);
--   * outcome counters are upserted in the statement that applied the outcomes, rows ordered by
--     their key so concurrent upserts cannot deadlock.


-- name: create_version_table
-- Run by the migration runner (no parameters; two statements).
CREATE SCHEMA IF NOT EXISTS {schema};
CREATE TABLE IF NOT EXISTS {schema}.schema_version (
    version    integer     PRIMARY KEY,
    title      text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);

-- name: applied_versions
SELECT version FROM {schema}.schema_version ORDER BY version;

-- name: record_version
INSERT INTO {schema}.schema_version (version, title) VALUES (%(version)s, %(title)s);

-- name: schema_exists
SELECT to_regclass(%(table)s) IS NOT NULL;

-- name: drop_schema
DROP SCHEMA IF EXISTS {schema} CASCADE;

-- name: ping
SELECT 1;


-- name: enqueue
-- One row per NewJob, passed as parallel arrays (binary). An id already stored is left alone (so
-- retrying an enqueue whose answer was lost is harmless) and reported as not inserted.
-- Returns: inserted (text[]), woken (number of queues notified).
WITH new AS (
    INSERT INTO {schema}.jobs AS j (
        id, task, queue, payload, status, max_attempts, key, priority,
        enqueued_at, scheduled_for, position)
    SELECT n.id, n.task, n.queue, n.payload,
           CASE WHEN n.scheduled_for > n.enqueued_at THEN 'scheduled' ELSE 'queued' END,
           n.max_attempts, n.key, n.priority, n.enqueued_at, n.scheduled_for, n.enqueued_at
    FROM unnest(%(ids)b::text[], %(tasks)b::text[], %(queues)b::text[], %(payloads)b::bytea[],
                %(max_attempts)b::integer[], %(keys)b::text[], %(priorities)b::integer[],
                %(enqueued_at)b::double precision[], %(scheduled_for)b::double precision[])
         AS n(id, task, queue, payload, max_attempts, key, priority, enqueued_at, scheduled_for)
    ON CONFLICT (id) DO NOTHING
    RETURNING j.id, j.queue, j.status
),
known AS (
    INSERT INTO {schema}.queues (name)
    SELECT DISTINCT queue FROM new ORDER BY 1
    ON CONFLICT (name) DO NOTHING
)
SELECT ARRAY(SELECT id FROM new) AS inserted,
       (SELECT count(pg_notify(%(channel)s, q.queue))
          FROM (SELECT DISTINCT queue FROM new WHERE status = 'queued') AS q) AS woken;


-- name: claim
-- Up to %(limit)s queued jobs, queue by queue in the order of %(queues)s (text[]), each queue
-- read through jobs_ready in (priority DESC, position, id) order. The nested loop pulls rows
-- lazily, so once %(limit)s rows are found no further row is locked.
-- Returns: queue_pos, position, then {columns} with the new state.
WITH candidates AS (
    SELECT q.pos, c.id, c.lost, c.priority, c.position
    FROM unnest(%(queues)s::text[]) WITH ORDINALITY AS q(name, pos)
    CROSS JOIN LATERAL (
        SELECT j.id, j.lost, j.priority, j.position
        FROM {schema}.jobs j
        WHERE j.status = 'queued' AND j.queue = q.name
        ORDER BY j.priority DESC, j.position, j.id
        LIMIT %(limit)s
        FOR UPDATE SKIP LOCKED
    ) AS c
    LIMIT %(limit)s
),
-- A job that already lost a worker (lost > 0) may be a poison pill: it is taken only alone, as
-- the first job of a claim, and nothing after it is taken (the rest stay queued; their row
-- locks end with this transaction).
ranked AS (
    SELECT pos, id,
           row_number() OVER claim_order AS rn,
           count(*) FILTER (WHERE lost > 0) OVER (claim_order ROWS UNBOUNDED PRECEDING)
               AS tainted
    FROM candidates
    WINDOW claim_order AS (ORDER BY pos, priority DESC, position, id)
),
wanted AS (
    SELECT pos, id FROM ranked WHERE tainted = 0 OR rn = 1
)
UPDATE {schema}.jobs j
SET status = 'running',
    attempts = j.attempts + 1,
    started_at = %(now)s,
    worker = %(worker)s,
    lease_until = %(lease_until)s,
    finished_at = NULL,
    result = NULL
FROM wanted w
WHERE j.id = w.id
RETURNING w.pos, j.position, {columns};


-- name: heartbeat
-- Returns: extended (text[]), the ids among %(ids)s still running under %(worker)s.
WITH seen AS (
    UPDATE {schema}.workers SET last_seen = %(now)s WHERE id = %(worker)s
),
extended AS (
    UPDATE {schema}.jobs j
    SET lease_until = %(lease_until)s
    WHERE j.id = ANY(%(ids)s::text[]) AND j.status = 'running' AND j.worker = %(worker)s
    RETURNING j.id
)
SELECT ARRAY(SELECT id FROM extended) AS extended;


-- name: finish
-- Outcomes as parallel arrays; each applies only while its job is running under %(worker)s.
--   succeeded: result, finished_at, expire_at        failed: errors, finished_at, expire_at
--   retry:     errors, retrying until run_at          release: attempts - 1, back to the head of
--              its queue (or scheduled for run_at when run_at > now)
-- Returns: applied (text[]), woken.
WITH o AS (
    SELECT *
    FROM unnest(%(ids)s::text[], %(kinds)s::text[], %(results)s::bytea[], %(errors)s::bytea[],
                %(run_at)s::double precision[], %(expire_at)s::double precision[])
         AS o(id, kind, result, errors, run_at, expire_at)
),
done AS (
    UPDATE {schema}.jobs j
    SET status = CASE o.kind
            WHEN 'succeeded' THEN 'succeeded'
            WHEN 'failed' THEN 'failed'
            WHEN 'retry' THEN 'retrying'
            ELSE CASE WHEN coalesce(o.run_at, %(now)s) <= %(now)s THEN 'queued'
                      ELSE 'scheduled' END
        END,
        attempts = CASE WHEN o.kind = 'release' THEN greatest(j.attempts - 1, 0)
                        ELSE j.attempts END,
        result = CASE WHEN o.kind = 'succeeded' THEN o.result END,
        errors = CASE WHEN o.kind IN ('failed', 'retry') THEN o.errors ELSE j.errors END,
        finished_at = CASE WHEN o.kind IN ('succeeded', 'failed') THEN %(now)s END,
        expire_at = CASE WHEN o.kind IN ('succeeded', 'failed') THEN o.expire_at END,
        scheduled_for = CASE
            WHEN o.kind = 'retry' THEN coalesce(o.run_at, %(now)s)
            WHEN o.kind = 'release' AND o.run_at > %(now)s THEN o.run_at
            ELSE j.scheduled_for
        END,
        position = CASE WHEN o.kind = 'release' THEN j.enqueued_at - 1e12 ELSE j.position END,
        worker = CASE WHEN o.kind IN ('succeeded', 'failed') THEN j.worker END,
        lease_until = NULL
    FROM o
    WHERE j.id = o.id AND j.status = 'running' AND j.worker = %(worker)s
    RETURNING j.id, j.task, j.queue, j.status, o.kind
),
counted AS (
    INSERT INTO {schema}.stats AS s (minute, task, queue, succeeded, failed, retried)
    SELECT %(minute)s, d.task, d.queue,
           count(*) FILTER (WHERE d.kind = 'succeeded'),
           count(*) FILTER (WHERE d.kind = 'failed'),
           count(*) FILTER (WHERE d.kind = 'retry')
    FROM done d
    WHERE d.kind <> 'release'
    GROUP BY d.task, d.queue
    ORDER BY d.task, d.queue
    ON CONFLICT (minute, task, queue) DO UPDATE
    SET succeeded = s.succeeded + excluded.succeeded,
        failed = s.failed + excluded.failed,
        retried = s.retried + excluded.retried
)
SELECT ARRAY(SELECT id FROM done) AS applied,
       (SELECT count(pg_notify(%(channel)s, q.queue))
          FROM (SELECT DISTINCT queue FROM done WHERE status = 'queued') AS q) AS woken;


-- name: promote_due
-- Reads jobs_due only up to %(now)s: the cost is the number due, never the number pending.
-- Returns: moved, next_due (earliest scheduled_for still pending, or NULL), woken.
WITH due AS (
    SELECT j.id
    FROM {schema}.jobs j
    WHERE j.status IN ('scheduled', 'retrying') AND j.scheduled_for <= %(now)s
    ORDER BY j.scheduled_for
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
),
moved AS (
    UPDATE {schema}.jobs j
    SET status = 'queued', position = j.scheduled_for
    FROM due
    WHERE j.id = due.id
    RETURNING j.id, j.queue
)
SELECT (SELECT count(*) FROM moved) AS moved,
       (SELECT j.scheduled_for
          FROM {schema}.jobs j
         WHERE j.status IN ('scheduled', 'retrying')
           -- NOT IN over the CTE is one hashed lookup per row; NOT EXISTS was planned as a
           -- nested loop over every moved row (quadratic in the batch).
           AND j.id NOT IN (SELECT m.id FROM moved m)
         ORDER BY j.scheduled_for
         LIMIT 1) AS next_due,
       (SELECT count(pg_notify(%(channel)s, q.queue))
          FROM (SELECT DISTINCT queue FROM moved) AS q) AS woken;


-- name: recover
-- Running jobs whose lease lapsed before %(now)s, at most %(limit)s, each locked by exactly one
-- caller. Below %(max_lost)s losses: back to the head of the queue, attempts kept. At
-- %(max_lost)s: failed with a LostWorker error appended, counted, expiring at %(failed_expire_at)s.
-- Returns: requeued (text[]), quarantined (text[]), woken.
WITH lapsed AS (
    SELECT j.id
    FROM {schema}.jobs j
    WHERE j.status = 'running' AND j.lease_until < %(now)s
    ORDER BY j.lease_until
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
),
recovered AS (
    UPDATE {schema}.jobs j
    SET lost = j.lost + 1,
        status = CASE WHEN j.lost + 1 >= %(max_lost)s THEN 'failed' ELSE 'queued' END,
        worker = CASE WHEN j.lost + 1 >= %(max_lost)s THEN j.worker END,
        lease_until = NULL,
        position = CASE WHEN j.lost + 1 >= %(max_lost)s THEN j.position
                        ELSE j.enqueued_at - 1e12 END,
        finished_at = CASE WHEN j.lost + 1 >= %(max_lost)s THEN %(now)s END,
        expire_at = CASE WHEN j.lost + 1 >= %(max_lost)s THEN %(failed_expire_at)s END,
        errors = CASE
            WHEN j.lost + 1 >= %(max_lost)s THEN convert_to((
                coalesce(convert_from(j.errors, 'UTF8')::jsonb, '[]'::jsonb)
                || jsonb_build_array(jsonb_build_object(
                    'type', 'LostWorker',
                    'message', 'lost its worker ' || (j.lost + 1) || ' times',
                    'traceback', '',
                    'at', %(now)s::double precision,
                    'attempt', j.attempts))
            )::text, 'UTF8')
            ELSE j.errors
        END
    FROM lapsed
    WHERE j.id = lapsed.id
    RETURNING j.id, j.task, j.queue, j.status
),
counted AS (
    INSERT INTO {schema}.stats AS s (minute, task, queue, failed)
    SELECT %(minute)s, r.task, r.queue, count(*)
    FROM recovered r
    WHERE r.status = 'failed'
    GROUP BY r.task, r.queue
    ORDER BY r.task, r.queue
    ON CONFLICT (minute, task, queue) DO UPDATE SET failed = s.failed + excluded.failed
)
SELECT ARRAY(SELECT id FROM recovered WHERE status = 'queued') AS requeued,
       ARRAY(SELECT id FROM recovered WHERE status = 'failed') AS quarantined,
       (SELECT count(pg_notify(%(channel)s, q.queue))
          FROM (SELECT DISTINCT queue FROM recovered WHERE status = 'queued') AS q) AS woken;


-- name: register_worker
INSERT INTO {schema}.workers (id, started_at, last_seen, info)
VALUES (%(worker)s, %(now)s, %(now)s, %(info)s)
ON CONFLICT (id) DO UPDATE
SET started_at = excluded.started_at, last_seen = excluded.last_seen, info = excluded.info;

-- name: unregister_worker
DELETE FROM {schema}.workers WHERE id = %(worker)s;

-- name: workers
SELECT id, started_at, last_seen, info FROM {schema}.workers ORDER BY id;


-- name: cancel
UPDATE {schema}.jobs j
SET status = 'cancelled', finished_at = %(now)s, expire_at = %(expire_at)s, lease_until = NULL
WHERE j.id = %(id)s AND j.status IN ('scheduled', 'queued', 'running', 'retrying')
RETURNING j.id;

-- name: retry
-- A failed or cancelled job becomes claimable now, with fresh attempts and its errors kept.
-- Returns: retried (0 or 1), woken.
WITH again AS (
    UPDATE {schema}.jobs j
    SET status = 'queued', attempts = 0, lost = 0, finished_at = NULL, result = NULL,
        expire_at = NULL, worker = NULL, lease_until = NULL, position = %(now)s
    WHERE j.id = %(id)s AND j.status IN ('failed', 'cancelled')
    RETURNING j.queue
)
SELECT (SELECT count(*) FROM again) AS retried,
       (SELECT count(pg_notify(%(channel)s, queue)) FROM again) AS woken;


-- name: purge
-- At most %(limit)s expired finished jobs, skipping rows someone holds (never waits on a lock,
-- never holds many), plus counter buckets whose minute ended more than 24 h before %(now)s.
-- Returns: deleted.
WITH doomed AS (
    SELECT j.id
    FROM {schema}.jobs j
    WHERE j.expire_at <= %(now)s AND j.status IN ('succeeded', 'failed', 'cancelled')
    ORDER BY j.expire_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
),
deleted AS (
    DELETE FROM {schema}.jobs j USING doomed WHERE j.id = doomed.id RETURNING 1
),
old_stats AS (
    DELETE FROM {schema}.stats WHERE minute < %(oldest_minute)s
),
-- Workers that died without unregistering and were not seen for 24 h.
old_workers AS (
    DELETE FROM {schema}.workers WHERE last_seen < %(worker_cutoff)s
)
SELECT count(*) AS deleted FROM deleted;


-- name: write_raw_payload
UPDATE {schema}.jobs SET payload = %(payload)s WHERE id = %(id)s;


-- name: get_job
SELECT {columns} FROM {schema}.jobs j WHERE j.id = %(id)s;

-- name: list_jobs
-- Newest first through the primary key (or jobs_status when a status is given).
SELECT {columns}
FROM {schema}.jobs j
WHERE (%(status)s::text IS NULL OR j.status = %(status)s)
  AND (%(task)s::text IS NULL OR j.task = %(task)s)
  AND (%(queue)s::text IS NULL OR j.queue = %(queue)s)
ORDER BY j.id DESC
LIMIT %(limit)s;

-- name: list_jobs_by_key
-- One key's jobs only, newest first, through jobs_key.
SELECT {columns}
FROM {schema}.jobs j
WHERE j.key = %(key)s
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
           count(*) FILTER (WHERE j.status = 'running') AS running
    FROM {schema}.jobs j
    WHERE j.status IN ('scheduled', 'queued', 'running', 'retrying')
    GROUP BY j.queue
)
SELECT q.name, coalesce(c.queued, 0), coalesce(c.scheduled, 0), coalesce(c.running, 0)
FROM {schema}.queues q
LEFT JOIN counts c ON c.queue = q.name
ORDER BY q.name;

-- name: stats
SELECT minute, task, queue, succeeded, failed, retried
FROM {schema}.stats
WHERE minute >= %(first_minute)s
ORDER BY minute, task, queue;
