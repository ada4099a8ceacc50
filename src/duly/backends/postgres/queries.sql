-- Named queries of the PostgreSQL backend (parsed by duly.backends._sql.load_queries).
--
-- Substitution: before use, PostgresBackend replaces exactly two tokens in every query, once,
-- when the backend is built:
--   {schema}   the schema name quoted by psycopg.sql.Identifier (never raw user text);
--   {columns}  the JobRecord columns of the table aliased `j`.
-- Rows become records by column NAME (duly.backends.postgres._rows): a query returning records
-- names every column after its field, in any order.
-- Everything else is plain SQL with psycopg named parameters `%(name)s`, or `%(name)b` to send
-- a parameter in binary format (the enqueue arrays: 3-4x cheaper to parse than array literals);
-- a literal percent sign would be written `%%`. Queries are schema-qualified instead of relying on search_path so the
-- same text runs on the caller's own connection (transactional enqueue) unchanged.
--
-- Invariants kept by every query below:
--   * each one is ONE statement, hence one transaction: a crash between two lines of Python
--     never leaves a half-applied state change. The few that must follow one another (a unique
--     enqueue, a gate slot freed then its parked job woken, rate slots) run in one transaction,
--     and only when the batch needs them: plain jobs keep one statement per call;
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


-- name: enqueue_fresh
-- The enqueue of a batch without unique jobs, on a connection with no transaction open: a plain
-- INSERT. It skips what ON CONFLICT costs on every row (a probe of each unique index before the
-- insert, then a second WAL record to confirm it: a third of the statement's time), and returns
-- nothing per job: every row is stored or none is. When an id is already stored (a resend
-- after a lost answer) or repeats in the batch, it fails with unique_violation and stores
-- nothing; the caller then runs `enqueue`, which skips those ids.
-- Columns: each is sent as `a_<column>` (one value per job) or, when every job of the batch has
-- the same value, as `v_<column>` and an empty array (unnest pads it with NULLs, which coalesce
-- replaces): a bulk batch of one task sends little more than its ids and payloads. `status` is
-- computed by the caller (scheduled_for > enqueued_at), and so are the batch's queues (`queues`,
-- sorted) and the queues it gives a queued job (`wake`).
-- Returns: woken (number of queues notified).
WITH new AS (
    INSERT INTO {schema}.jobs (
        id, task, queue, payload, status, max_attempts, key, priority,
        enqueued_at, scheduled_for, position, gate, gate_limit, expires_at)
    SELECT n.id,
           coalesce(n.task, %(v_task)b::text),
           coalesce(n.queue, %(v_queue)b::text),
           coalesce(n.payload, %(v_payload)b::bytea),
           coalesce(n.status, %(v_status)b::text),
           coalesce(n.max_attempts, %(v_max_attempts)b::integer),
           coalesce(n.key, %(v_key)b::text),
           coalesce(n.priority, %(v_priority)b::integer),
           coalesce(n.enqueued_at, %(v_enqueued_at)b::double precision),
           coalesce(n.scheduled_for, %(v_scheduled_for)b::double precision),
           coalesce(n.enqueued_at, %(v_enqueued_at)b::double precision),
           coalesce(n.gate, %(v_gate)b::text),
           coalesce(n.gate_limit, %(v_gate_limit)b::integer),
           coalesce(n.expires_at, %(v_expires_at)b::double precision)
    FROM unnest(%(a_id)b::text[], %(a_task)b::text[], %(a_queue)b::text[],
                %(a_payload)b::bytea[], %(a_status)b::text[], %(a_max_attempts)b::integer[],
                %(a_key)b::text[], %(a_priority)b::integer[],
                %(a_enqueued_at)b::double precision[], %(a_scheduled_for)b::double precision[],
                %(a_gate)b::text[], %(a_gate_limit)b::integer[],
                %(a_expires_at)b::double precision[])
         AS n(id, task, queue, payload, status, max_attempts, key, priority, enqueued_at,
              scheduled_for, gate, gate_limit, expires_at)
),
known AS (
    INSERT INTO {schema}.queues (name)
    SELECT name FROM unnest(%(queues)b::text[]) AS name ORDER BY 1
    ON CONFLICT (name) DO NOTHING
)
SELECT count(pg_notify(%(channel)s, q)) AS woken FROM unnest(%(wake)b::text[]) AS q;

-- name: enqueue
-- Any batch, in any transaction. One row per NewJob, its columns sent as in enqueue_fresh
-- (binary arrays, or one value for the whole batch), plus the unique hold's. A row that meets
-- any unique index is left out and reported as not inserted: an id already stored (so retrying
-- an enqueue whose answer was lost is harmless), or a unique key held by an active job (the
-- caller then asks unique_holders who holds it). Rows go in by unique key, then batch order:
-- the first of a batch's duplicates wins, and two batches wait on each other's keys in one
-- order (no deadlock).
-- Returns: inserted (text[]), woken (number of queues notified).
WITH new AS (
    INSERT INTO {schema}.jobs AS j (
        id, task, queue, payload, status, max_attempts, key, priority,
        enqueued_at, scheduled_for, position,
        unique_key, unique_until, unique_expires_at, gate, gate_limit, expires_at)
    SELECT n.id, n.task, n.queue, n.payload, n.status, n.max_attempts, n.key, n.priority,
           n.enqueued_at, n.scheduled_for, n.enqueued_at,
           n.unique_key, n.unique_until, n.unique_expires_at, n.gate, n.gate_limit, n.expires_at
    FROM (
        SELECT u.id,
               coalesce(u.task, %(v_task)b::text) AS task,
               coalesce(u.queue, %(v_queue)b::text) AS queue,
               coalesce(u.payload, %(v_payload)b::bytea) AS payload,
               coalesce(u.status, %(v_status)b::text) AS status,
               coalesce(u.max_attempts, %(v_max_attempts)b::integer) AS max_attempts,
               coalesce(u.key, %(v_key)b::text) AS key,
               coalesce(u.priority, %(v_priority)b::integer) AS priority,
               coalesce(u.enqueued_at, %(v_enqueued_at)b::double precision) AS enqueued_at,
               coalesce(u.scheduled_for, %(v_scheduled_for)b::double precision)
                   AS scheduled_for,
               coalesce(u.unique_key, %(v_unique_key)b::text) AS unique_key,
               coalesce(u.unique_until, %(v_unique_until)b::text) AS unique_until,
               coalesce(u.unique_expires_at, %(v_unique_expires_at)b::double precision)
                   AS unique_expires_at,
               coalesce(u.gate, %(v_gate)b::text) AS gate,
               coalesce(u.gate_limit, %(v_gate_limit)b::integer) AS gate_limit,
               coalesce(u.expires_at, %(v_expires_at)b::double precision) AS expires_at,
               u.ord
        FROM unnest(%(a_id)b::text[], %(a_task)b::text[], %(a_queue)b::text[],
                    %(a_payload)b::bytea[], %(a_status)b::text[], %(a_max_attempts)b::integer[],
                    %(a_key)b::text[], %(a_priority)b::integer[],
                    %(a_enqueued_at)b::double precision[],
                    %(a_scheduled_for)b::double precision[],
                    %(a_unique_key)b::text[], %(a_unique_until)b::text[],
                    %(a_unique_expires_at)b::double precision[],
                    %(a_gate)b::text[], %(a_gate_limit)b::integer[],
                    %(a_expires_at)b::double precision[])
             WITH ORDINALITY
             AS u(id, task, queue, payload, status, max_attempts, key, priority, enqueued_at,
                  scheduled_for, unique_key, unique_until, unique_expires_at, gate, gate_limit,
                  expires_at, ord)
    ) AS n
    ORDER BY n.unique_key, n.ord
    ON CONFLICT DO NOTHING
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

-- name: debounce
-- After unique_holders, in the same transaction: the holders of debounced keys (NewJob.debounce)
-- still waiting (scheduled, or queued parked or not; each row locked first, read at its latest
-- version) take the new jobs' payloads and due times and are scheduled again; a running one is
-- not touched. Returns per holder changed: gate, ready (queued and not parked: a gated one's
-- turn passes on, gate_unpark).
WITH d AS (
    SELECT * FROM unnest(%(ids)s::text[], %(payloads)s::bytea[],
                         %(due)s::double precision[]) AS d(id, payload, due)
),
cur AS (
    SELECT j.id, j.status, j.parked
    FROM {schema}.jobs j JOIN d ON d.id = j.id
    WHERE j.status IN ('scheduled', 'queued')
    ORDER BY j.id
    FOR UPDATE OF j
)
UPDATE {schema}.jobs j
SET payload = d.payload, scheduled_for = d.due, status = 'scheduled', parked = false
FROM cur JOIN d ON d.id = cur.id
WHERE j.id = cur.id
RETURNING j.gate, cur.status = 'queued' AND NOT cur.parked;

-- name: unique_holders
-- For unique jobs that enqueue left out, in the same transaction (a later statement, so it sees
-- what enqueue waited for): is the id itself stored (a resend), and which active job holds the
-- key. A hold past its unique_expires_at (compared with the new job's enqueued_at) is taken
-- over here: the holder's unique_key becomes NULL (re-checked on the row's latest version), and
-- the caller inserts the new job again. So does it when the holder is gone (it finished or
-- started since the insert).
-- Returns one row per input: ord (1-based), stored (boolean), holder (text or NULL), expired.
WITH n AS (
    SELECT *
    FROM unnest(%(ids)s::text[], %(unique_keys)s::text[], %(enqueued_at)s::double precision[])
         WITH ORDINALITY AS n(id, unique_key, enqueued_at, ord)
),
holders AS (
    SELECT n.ord, h.id, h.unique_key, h.unique_expires_at <= n.enqueued_at AS expired,
           n.enqueued_at
    FROM n
    JOIN {schema}.jobs h
      ON h.unique_key = n.unique_key
     AND h.status IN ('scheduled', 'queued', 'running', 'retrying')
),
taken_over AS (
    UPDATE {schema}.jobs h
    SET unique_key = NULL
    FROM holders x
    WHERE h.id = x.id AND x.expired
      AND h.unique_key = x.unique_key
      AND h.status IN ('scheduled', 'queued', 'running', 'retrying')
      AND h.unique_expires_at <= x.enqueued_at
)
SELECT n.ord,
       EXISTS (SELECT 1 FROM {schema}.jobs s WHERE s.id = n.id) AS stored,
       x.id AS holder,
       coalesce(x.expired, false) AS expired
FROM n
LEFT JOIN holders x ON x.ord = n.ord
ORDER BY n.ord;


-- name: claim_lock
-- First statement of a claim's transaction: the shared advisory lock of each queue of
-- %(queues)s (pause_lock takes it exclusive), held until commit. Advisory locks live in
-- memory: an empty poll writes nothing. The key: the OID of this schema's `queues` table in
-- the high 32 bits (distinct per schema, and never in the 0..2^32 range of the migration
-- lock, whose keys are CRC32s), the queue's hashtext in the low 32 bits (two queues sharing
-- one only wait for each other's pauses).
SELECT count(pg_advisory_xact_lock_shared(
           (to_regclass(quote_ident(%(schema)s) || '.queues')::oid::bigint << 32)
           | (hashtext(q.name)::bigint & 4294967295)))
FROM unnest(%(queues)b::text[]) AS q(name);

-- name: claim
-- Up to %(limit)s queued jobs, queue by queue in the order of %(queues)s (text[]), each queue
-- read through jobs_ready (parked = false) in (priority DESC, position, id) order. The nested
-- loop pulls rows lazily, so once %(limit)s rows are found no further row is locked.
--
-- Gated jobs: the first wanted job of each gate (its leader) asks the gate for a slot with an
-- upsert on `gates` (one per gate: ON CONFLICT cannot touch a row twice in a statement). The
-- upsert locks the gate row and reads its latest committed version even when its WHERE fails,
-- so the claims and releases of a gate are serialised on that row. With a slot, the leader is
-- taken; without, the gate's wanted jobs are parked (a release can only come after this
-- transaction commits, and will see them). The other jobs of a gate that granted a slot are
-- not touched (the next claim takes them or not). For plain jobs the gate CTEs see no rows;
-- parking is folded into the one UPDATE (a second UPDATE of `jobs` costs plain claims more).
--
-- Returns, for each job taken (run) or parked (not run): run, queue_pos, position, gate,
-- gate_limit, then {columns} with the new state.
WITH candidates AS (
    SELECT q.pos, c.id, c.lost, c.priority, c.position, c.gate, c.gate_limit
    FROM unnest(%(queues)b::text[]) WITH ORDINALITY AS q(name, pos)
    -- A paused queue gives nothing. No row lock: claim_lock, the statement before this one
    -- in the claim's transaction, orders it with a pause, and this statement's snapshot,
    -- taken after that lock, sees any pause committed before.
    LEFT JOIN {schema}.queues k ON k.name = q.name
    CROSS JOIN LATERAL (
        SELECT j.id, j.lost, j.priority, j.position, j.gate, j.gate_limit
        FROM {schema}.jobs j
        WHERE j.status = 'queued' AND j.queue = q.name AND NOT j.parked
          AND (j.expires_at IS NULL OR j.expires_at > %(now)s)
        ORDER BY j.priority DESC, j.position, j.id
        LIMIT %(limit)s
        FOR UPDATE SKIP LOCKED
    ) AS c
    WHERE k.paused_at IS NULL
    LIMIT %(limit)s
),
-- A job that already lost a worker (lost > 0) may be a poison pill: it is taken only alone, as
-- the first job of a claim (%(first)s: nothing was taken yet by this claim call), and nothing
-- after it is taken (the rest stay queued; their row locks end with this transaction).
ranked AS (
    SELECT pos, id, gate, gate_limit,
           row_number() OVER claim_order AS rn,
           count(*) FILTER (WHERE lost > 0) OVER (claim_order ROWS UNBOUNDED PRECEDING)
               AS tainted
    FROM candidates
    WINDOW claim_order AS (ORDER BY pos, priority DESC, position, id)
),
wanted AS (
    SELECT pos, id, gate, gate_limit, rn FROM ranked WHERE tainted = 0 OR (rn = 1 AND %(first)s)
),
leaders AS (
    SELECT DISTINCT ON (gate) pos, id, gate, gate_limit
    FROM wanted
    WHERE gate IS NOT NULL
    ORDER BY gate, rn
),
-- In gate order, so two claims lock gate rows in one order.
acquired AS (
    INSERT INTO {schema}.gates AS g (key, running)
    SELECT l.gate, 1 FROM leaders l ORDER BY l.gate
    ON CONFLICT (key) DO UPDATE SET running = g.running + 1
    WHERE g.running < (SELECT l.gate_limit FROM leaders l WHERE l.gate = excluded.key)
    RETURNING g.key
),
touched AS (
    SELECT pos, id, true AS run FROM wanted WHERE gate IS NULL
    UNION ALL
    SELECT l.pos, l.id, true FROM leaders l JOIN acquired a ON a.key = l.gate
    UNION ALL
    SELECT w.pos, w.id, false
    FROM wanted w
    WHERE w.gate IS NOT NULL AND w.gate NOT IN (SELECT key FROM acquired)
)
,
-- Expired jobs (0013): left out of the candidates above, so none starts; reported (run NULL)
-- for the claimer to end (expire_jobs).
expired AS (
    SELECT j.id
    FROM unnest(%(queues)b::text[]) AS q(name)
    CROSS JOIN LATERAL (
        SELECT j.id FROM {schema}.jobs j
        WHERE j.queue = q.name AND j.expires_at IS NOT NULL AND j.status = 'queued'
          AND j.expires_at <= %(now)s
        ORDER BY j.expires_at
        LIMIT 100
    ) AS j
    WHERE NOT EXISTS (  -- a paused queue is left alone, its expired jobs included
        SELECT 1 FROM {schema}.queues k WHERE k.name = q.name AND k.paused_at IS NOT NULL)
),
started AS (
UPDATE {schema}.jobs j
SET status = CASE WHEN t.run THEN 'running' ELSE j.status END,
    attempts = CASE WHEN t.run THEN j.attempts + 1 ELSE j.attempts END,
    started_at = CASE WHEN t.run THEN %(now)s ELSE j.started_at END,
    worker = CASE WHEN t.run THEN %(worker)s ELSE j.worker END,
    lease_until = CASE WHEN t.run THEN %(lease_until)s ELSE j.lease_until END,
    finished_at = CASE WHEN t.run THEN NULL ELSE j.finished_at END,
    -- A unique_until = 'start' hold ends when its job first starts.
    unique_key = CASE WHEN t.run AND j.unique_until = 'start' THEN NULL ELSE j.unique_key END,
    -- The expiry is about a job that never started: once started, a way back to queued (a
    -- recovery, a release, a retry) must not end it as "never run".
    expires_at = CASE WHEN t.run THEN NULL ELSE j.expires_at END,
    parked = NOT t.run
FROM touched t
WHERE j.id = t.id
RETURNING t.run, t.pos, j.position, j.gate, j.gate_limit, {columns}
)
SELECT * FROM started
UNION ALL
SELECT NULL::boolean, NULL::bigint, j.position, j.gate, j.gate_limit, {columns}
FROM {schema}.jobs j JOIN expired e ON e.id = j.id;

-- name: expire_jobs
-- The end of the jobs a claim found expired, %(ids)s (text[]), in one statement (rows locked
-- first, in id order as cancel_many does; one still queued and expired, else left alone):
-- cancelled as cancel does a waiting job, with a JobExpired error appended to its errors (JSON
-- list). Returns per job: gate, was_waiting (queued and not parked: its turn passes on) and the
-- record.
WITH cur AS (
    SELECT j.id, j.parked
    FROM {schema}.jobs j
    WHERE j.id = ANY(%(ids)s::text[]) AND j.status = 'queued' AND j.expires_at <= %(now)s
    ORDER BY j.id
    FOR UPDATE
)
UPDATE {schema}.jobs j
SET status = 'cancelled', finished_at = %(now)s, lease_until = NULL,
    expire_at = %(expire_at)s, parked = false,
    errors = convert_to((
        CASE WHEN j.errors IS NOT NULL AND jsonb_typeof(convert_from(j.errors, 'UTF8')::jsonb)
                                            = 'array'
             THEN convert_from(j.errors, 'UTF8')::jsonb ELSE '[]'::jsonb END
        || jsonb_build_array(jsonb_build_object(
               'type', 'JobExpired', 'message', %(message)s::text, 'traceback', '',
               'at', %(now)s::double precision, 'attempt', j.attempts)))::text, 'UTF8')
FROM cur
WHERE j.id = cur.id
RETURNING j.gate, NOT cur.parked, {columns};

-- name: gate_park
-- After a claim parked jobs of full gates (%(gates)s, each once, with the limit its leader
-- saw, %(limits)s): park the other queued jobs of those gates too, at once, so the next claim
-- reaches the jobs behind a backlog instead of parking it a batch at a time. Each gate row is
-- locked first (a no-op upsert returns its latest version) and re-checked: a gate freed
-- meanwhile is left alone. Rows other claims hold are theirs to park or take.
WITH asked AS (
    SELECT * FROM unnest(%(gates)s::text[], %(limits)s::integer[]) AS a(key, lim)
),
locked AS (
    INSERT INTO {schema}.gates AS g (key, running)
    SELECT key, 0 FROM asked ORDER BY key
    ON CONFLICT (key) DO UPDATE SET running = g.running
    RETURNING g.key, g.running
),
full_gate AS (
    SELECT l.key FROM locked l JOIN asked a ON a.key = l.key WHERE l.running >= a.lim
)
UPDATE {schema}.jobs j
SET parked = true
FROM full_gate f
CROSS JOIN LATERAL (
    SELECT x.id
    FROM {schema}.jobs x
    WHERE x.gate = f.key AND x.status = 'queued' AND NOT x.parked
    FOR UPDATE SKIP LOCKED
) AS p
WHERE j.id = p.id;


-- name: heartbeat
-- Extends the leases of the jobs among %(ids)s still running under %(worker)s.
-- Returns: extended (text[]), those of them whose cancel was not requested (expire_at is set
-- on a running job only by a cancel request): the worker must stop the others.
WITH seen AS (
    UPDATE {schema}.workers SET last_seen = %(now)s WHERE id = %(worker)s
),
extended AS (
    UPDATE {schema}.jobs j
    SET lease_until = %(lease_until)s
    WHERE j.id = ANY(%(ids)b::text[]) AND j.status = 'running' AND j.worker = %(worker)s
    RETURNING j.id, j.expire_at
)
SELECT ARRAY(SELECT id FROM extended WHERE expire_at IS NULL) AS extended;


-- name: finish
-- Outcomes as parallel arrays; each applies only while its job is running under %(worker)s.
--   succeeded: result, finished_at, expire_at        failed: errors, finished_at, expire_at
--   retry:     errors, retrying until run_at          release: attempts - 1, back to the head of
--              its queue (or scheduled for run_at when run_at > now), rate_slot stored
--   again:     result, attempts and lost 0, queued at run_at (scheduled when run_at > now)
-- Every kind but release clears rate_slot. result is kept unless the kind stores one (a job
-- that runs again sees its previous run's result). The unique key stays on the row: leaving the
-- active states is what ends its hold.
-- With %(with_gates)s false, jobs with a gate are left alone (not applied): freeing their slot
-- takes more statements, which the caller runs in a transaction for the outcomes not applied.
-- A job whose cancel was requested (expire_at set on a running row, see cancel) ends cancelled
-- instead, whatever its outcome, which is not applied nor counted (its gate slot frees too):
-- the same UPDATE, each column keeping its value (`j.expire_at IS NOT NULL` reads the row as
-- it was), so a finish costs one pass over its rows either way.
-- Returns: applied (text[]), freed (the gate of each job that left running, text[]), woken.
WITH o AS (
    SELECT *
    FROM unnest(%(ids)b::text[], %(kinds)b::text[], %(results)b::bytea[], %(errors)b::bytea[],
                %(run_at)b::double precision[], %(expire_at)b::double precision[],
                %(rate_slots)b::double precision[])
         AS o(id, kind, result, errors, run_at, expire_at, rate_slot)
),
done AS (
    UPDATE {schema}.jobs j
    SET status = CASE
            WHEN j.expire_at IS NOT NULL THEN 'cancelled'
            WHEN o.kind = 'succeeded' THEN 'succeeded'
            WHEN o.kind = 'failed' THEN 'failed'
            WHEN o.kind = 'retry' THEN 'retrying'
            WHEN coalesce(o.run_at, %(now)s) <= %(now)s THEN 'queued'
            ELSE 'scheduled'
        END,
        attempts = CASE WHEN j.expire_at IS NOT NULL THEN j.attempts
                        WHEN o.kind = 'release' THEN greatest(j.attempts - 1, 0)
                        WHEN o.kind = 'again' THEN 0
                        ELSE j.attempts END,
        lost = CASE WHEN o.kind = 'again' AND j.expire_at IS NULL THEN 0 ELSE j.lost END,
        result = CASE WHEN o.kind IN ('succeeded', 'again') AND j.expire_at IS NULL THEN o.result
                      ELSE j.result END,
        errors = CASE WHEN o.kind IN ('failed', 'retry') AND j.expire_at IS NULL THEN o.errors
                      ELSE j.errors END,
        finished_at = CASE WHEN j.expire_at IS NOT NULL OR o.kind IN ('succeeded', 'failed')
                           THEN %(now)s END,
        expire_at = CASE WHEN j.expire_at IS NOT NULL THEN j.expire_at
                         WHEN o.kind IN ('succeeded', 'failed') THEN o.expire_at END,
        scheduled_for = CASE
            WHEN j.expire_at IS NOT NULL THEN j.scheduled_for
            WHEN o.kind IN ('retry', 'again') THEN coalesce(o.run_at, %(now)s)
            WHEN o.kind = 'release' AND o.run_at > %(now)s THEN o.run_at
            ELSE j.scheduled_for
        END,
        position = CASE WHEN j.expire_at IS NOT NULL THEN j.position
                        WHEN o.kind = 'release' THEN j.enqueued_at - 1e12
                        WHEN o.kind = 'again' THEN coalesce(o.run_at, %(now)s)
                        ELSE j.position END,
        worker = CASE WHEN j.expire_at IS NOT NULL OR o.kind IN ('succeeded', 'failed')
                      THEN j.worker END,
        lease_until = NULL,
        rate_slot = CASE WHEN o.kind = 'release' AND j.expire_at IS NULL THEN o.rate_slot END
    FROM o
    WHERE j.id = o.id AND j.status = 'running' AND j.worker = %(worker)s
      AND (j.gate IS NULL OR %(with_gates)s)
    RETURNING j.id, j.task, j.queue, j.status, j.gate, o.kind
),
counted AS (
    INSERT INTO {schema}.stats AS s (minute, task, queue, succeeded, failed, retried)
    SELECT %(minute)s, d.task, d.queue,
           count(*) FILTER (WHERE d.kind IN ('succeeded', 'again')),
           count(*) FILTER (WHERE d.kind = 'failed'),
           count(*) FILTER (WHERE d.kind = 'retry')
    FROM done d
    WHERE d.kind <> 'release' AND d.status <> 'cancelled'
    GROUP BY d.task, d.queue
    ORDER BY d.task, d.queue
    ON CONFLICT (minute, task, queue) DO UPDATE
    SET succeeded = s.succeeded + excluded.succeeded,
        failed = s.failed + excluded.failed,
        retried = s.retried + excluded.retried
),
fresh AS (
    -- A freshness scope's sync: its scope changes with it (migrations/0004_freshness.sql).
    UPDATE {schema}.freshness f
    -- A success stores the follow-up a touch queued meanwhile (PRODUCT §17): `follow`.
    SET (last_attempt, last_success, stale_at, failures, last_error, next_due, job_id,
         requested_by, follow_up) = (
        SELECT x.last_attempt, x.last_success, x.stale_at, x.failures, x.last_error, x.next_due,
               x.job_id, x.requested_by, x.follow_up
        FROM {schema}.fresh_after(f, d.status, j.started_at, o.errors, %(now)s) x)
    FROM done d JOIN o ON o.id = d.id JOIN {schema}.jobs j ON j.id = d.id
    WHERE f.job_id = d.id AND d.status IN ('succeeded', 'failed', 'retrying', 'cancelled')
    RETURNING f.job_id, f.follow_up_payload, f.follow_up_priority, d.id AS ended, d.status,
              d.task, d.queue, j.max_attempts, j.key
),
follow AS (
    INSERT INTO {schema}.jobs (id, task, queue, payload, status, max_attempts, key, priority,
                               enqueued_at, scheduled_for, position)
    SELECT r.job_id, r.task, r.queue, r.follow_up_payload, 'queued', r.max_attempts, r.key,
           r.follow_up_priority, %(now)s, %(now)s, %(now)s
    FROM fresh r
    WHERE r.status = 'succeeded' AND r.job_id IS NOT NULL
    RETURNING queue
)
SELECT ARRAY(SELECT id FROM done WHERE status <> 'cancelled') AS applied,
       ARRAY(SELECT gate FROM done WHERE gate IS NOT NULL) AS freed,
       (SELECT count(pg_notify(%(channel)s, q.queue))
          FROM (SELECT queue FROM done WHERE status = 'queued'
                UNION SELECT queue FROM follow) AS q) AS woken;


-- name: gate_release
-- In the transaction that moved gated jobs out of `running`: one slot back per entry of
-- %(gates)s (text[], a gate once per job). The gate rows are locked in key order first, so two
-- releases (and claims, which upsert in key order too) never deadlock.
WITH freed AS (
    SELECT gate, count(*) AS n FROM unnest(%(gates)s::text[]) AS f(gate) GROUP BY gate
),
locked AS MATERIALIZED (
    SELECT g.key
    FROM {schema}.gates g
    WHERE g.key IN (SELECT gate FROM freed)
    ORDER BY g.key
    FOR UPDATE
)
UPDATE {schema}.gates g
SET running = g.running - f.n
FROM freed f
JOIN locked l ON l.key = f.gate
WHERE g.key = f.gate;

-- name: gate_unpark
-- After gate_release (or a cancel of a queued gated job), as a SEPARATE statement of the same
-- transaction: its fresh snapshot sees the jobs parked by a claim that held a gate row while
-- gate_release waited for it. Puts the best parked job of each gate back in its queue, once per
-- entry of %(gates)s, and wakes those queues. Parked rows are never claim candidates, so SKIP
-- LOCKED only passes over a job being cancelled.
-- Returns: unparked, woken.
WITH freed AS (
    SELECT gate, count(*) AS n FROM unnest(%(gates)s::text[]) AS f(gate) GROUP BY gate
),
best AS (
    SELECT b.id
    FROM freed f
    CROSS JOIN LATERAL (
        SELECT j.id
        FROM {schema}.jobs j
        WHERE j.gate = f.gate AND j.status = 'queued' AND j.parked
        ORDER BY j.priority DESC, j.position, j.id
        LIMIT f.n
        FOR UPDATE SKIP LOCKED
    ) AS b
),
unparked AS (
    UPDATE {schema}.jobs j
    SET parked = false
    FROM best
    WHERE j.id = best.id
    RETURNING j.queue
)
SELECT (SELECT count(*) FROM unparked) AS unparked,
       (SELECT count(pg_notify(%(channel)s, q.queue))
          FROM (SELECT DISTINCT queue FROM unparked) AS q) AS woken;


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
-- Either way rate_slot is cleared. A job whose cancel was requested (expire_at set, see cancel)
-- is neither: it ends cancelled (`stopped`), lost unchanged. With %(with_gates)s false, lapsed
-- jobs with a gate are left alone (see finish) and reported by gated_left.
-- Returns: requeued (text[]), quarantined (text[]), freed (gates, text[]), gated_left, woken,
-- cancelled (text[]).
WITH lapsed AS (
    SELECT j.id, j.gate
    FROM {schema}.jobs j
    WHERE j.status = 'running' AND j.lease_until < %(now)s
    ORDER BY j.lease_until
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
),
stopped AS (
    UPDATE {schema}.jobs j
    SET status = 'cancelled', finished_at = %(now)s, lease_until = NULL, rate_slot = NULL
    FROM lapsed
    WHERE j.id = lapsed.id AND j.expire_at IS NOT NULL
      AND (lapsed.gate IS NULL OR %(with_gates)s)
    RETURNING j.id, j.gate
),
recovered AS (
    UPDATE {schema}.jobs j
    SET lost = j.lost + 1,
        status = CASE WHEN j.lost + 1 >= %(max_lost)s THEN 'failed' ELSE 'queued' END,
        worker = CASE WHEN j.lost + 1 >= %(max_lost)s THEN j.worker END,
        lease_until = NULL,
        rate_slot = NULL,
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
    WHERE j.id = lapsed.id AND j.expire_at IS NULL AND (lapsed.gate IS NULL OR %(with_gates)s)
    RETURNING j.id, j.task, j.queue, j.status, j.gate
),
counted AS (
    INSERT INTO {schema}.stats AS s (minute, task, queue, failed)
    SELECT %(minute)s, r.task, r.queue, count(*)
    FROM recovered r
    WHERE r.status = 'failed'
    GROUP BY r.task, r.queue
    ORDER BY r.task, r.queue
    ON CONFLICT (minute, task, queue) DO UPDATE SET failed = s.failed + excluded.failed
),
fresh AS (
    -- A freshness scope's sync: its scope changes with it (migrations/0004_freshness.sql).
    UPDATE {schema}.freshness f
    SET (last_attempt, last_success, stale_at, failures, last_error, next_due, job_id,
         follow_up) = (
        SELECT x.last_attempt, x.last_success, x.stale_at, x.failures, x.last_error, x.next_due,
               x.job_id, x.follow_up
        FROM {schema}.fresh_after(f, e.status, j.started_at, e.errors, %(now)s) x)
    FROM (SELECT r.id, r.status, convert_to(jsonb_build_array(jsonb_build_object(
                 'type', 'LostWorker', 'message', 'lost its worker ' || %(max_lost)s || ' times'
             ))::text, 'UTF8') AS errors
          FROM recovered r WHERE r.status = 'failed'
          UNION ALL
          SELECT s.id, 'cancelled', NULL::bytea FROM stopped s) AS e
    JOIN {schema}.jobs j ON j.id = e.id
    WHERE f.job_id = e.id
)
SELECT ARRAY(SELECT id FROM recovered WHERE status = 'queued') AS requeued,
       ARRAY(SELECT id FROM recovered WHERE status = 'failed') AS quarantined,
       ARRAY(SELECT gate FROM recovered WHERE gate IS NOT NULL
             UNION ALL SELECT gate FROM stopped WHERE gate IS NOT NULL) AS freed,
       EXISTS (SELECT 1 FROM lapsed WHERE gate IS NOT NULL AND NOT %(with_gates)s) AS gated_left,
       (SELECT count(pg_notify(%(channel)s, q.queue))
          FROM (SELECT DISTINCT queue FROM recovered WHERE status = 'queued') AS q) AS woken,
       ARRAY(SELECT id FROM stopped) AS cancelled;


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


-- name: rate_lock
-- First statement of reserve_rate: one row per key of the batch, created (tat = now, no
-- not_before: equivalent to no state) or locked, in key order. ON CONFLICT DO UPDATE locks the
-- row and returns its latest committed version, so concurrent reservations of a key queue here.
-- Returns: key, tat, not_before.
INSERT INTO {schema}.rate_limits AS r (key, tat, not_before)
SELECT DISTINCT k, %(now)s::double precision, 0.0 FROM unnest(%(keys)s::text[]) AS k ORDER BY 1
ON CONFLICT (key) DO UPDATE SET tat = r.tat
RETURNING r.key, r.tat, r.not_before;

-- name: rate_store
-- Second statement of reserve_rate: each key's state after the batch's slots.
UPDATE {schema}.rate_limits r
SET tat = n.tat, not_before = n.not_before
FROM unnest(%(keys)s::text[], %(tats)s::double precision[], %(not_before)s::double precision[])
     AS n(key, tat, not_before)
WHERE r.key = n.key;


-- name: purge
-- At most %(limit)s expired finished jobs, skipping rows someone holds (never waits on a lock,
-- never holds many), plus counter buckets whose minute ended more than 24 h before %(now)s,
-- workers long gone, idle rate limits and idle gates.
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
),
-- Rate state whose tat has passed, and gates with no running job: both are equivalent to no
-- row. SKIP LOCKED: a row someone holds is in use (and this never waits, so never deadlocks);
-- FOR UPDATE re-checks the condition on the row's latest version.
idle_rates AS (
    DELETE FROM {schema}.rate_limits r
    WHERE r.key IN (SELECT x.key FROM {schema}.rate_limits x WHERE x.tat <= %(now)s
                    FOR UPDATE SKIP LOCKED)
),
idle_gates AS (
    DELETE FROM {schema}.gates g
    WHERE g.key IN (SELECT x.key FROM {schema}.gates x WHERE x.running = 0
                    FOR UPDATE SKIP LOCKED)
)
SELECT count(*) AS deleted FROM deleted;


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

-- name: group_store
-- Second statement of enqueue_group, after `enqueue` stored the members and the callback (the
-- callback `scheduled` for +inf): mark the members, take the callback's due time away (no
-- promotion reads a NULL scheduled_for), store the group. No status changes: no event.
WITH members AS (
    UPDATE {schema}.jobs j SET group_id = %(id)s
    WHERE j.id = ANY(%(members)s::text[])
    RETURNING 1
),
waits AS (
    UPDATE {schema}.jobs j SET scheduled_for = NULL
    WHERE j.id = %(id)s AND %(has_callback)s
    RETURNING 1
)
INSERT INTO {schema}.groups (id, key, created_at, total, pending, retention, has_callback)
SELECT %(id)s, %(key)s, %(created_at)s, %(total)s, %(total)s, %(retention)s, %(has_callback)s
WHERE (SELECT count(*) FROM members) = %(total)s;

-- name: group_name_take
-- First statement of a named group's enqueue_group (0011): its row, unless a stored group has
-- the name (a concurrent store of it waits here for the first to commit). Returns its id when
-- inserted; then the members are stored and marked (group_mark).
INSERT INTO {schema}.groups
    (id, key, created_at, total, pending, retention, has_callback, name, members)
VALUES (%(id)s, %(key)s, %(created_at)s, %(total)s, %(total)s, %(retention)s, %(has_callback)s,
        %(name)s, %(members)s::text[])
ON CONFLICT (name) WHERE name IS NOT NULL DO NOTHING
RETURNING id;

-- name: group_named
-- The stored group of this name (group_name_take found it), with its members.
SELECT id, members FROM {schema}.groups WHERE name = %(name)s;

-- name: group_mark
-- A named group's last statement, after its row and its jobs: mark the members, take the
-- callback's due time away. Returns how many members it marked.
WITH waits AS (
    UPDATE {schema}.jobs j SET scheduled_for = NULL
    WHERE j.id = %(id)s AND %(has_callback)s
    RETURNING 1
)
UPDATE {schema}.jobs j SET group_id = %(id)s
WHERE j.id = ANY(%(members)s::text[]);

-- name: get_group
-- By id, or by name (a name never has the form of a generated id: duly._groups refuses it).
SELECT id, key, created_at, total, succeeded, failed, cancelled, completed_at, has_callback,
       first_completed_at, name
FROM {schema}.groups WHERE id = %(id)s OR name = %(id)s
LIMIT 1;

-- name: events_wait_mark
-- First step of wait_for_events, before events_allocated: the writers notify the events channel
-- only while this mark (the database clock's epoch milliseconds) is in the future (see
-- migrations/0007_lean_event_triggers.sql). It only rises, but two readers marking at the same
-- instant may both read the old value and the lower mark win: %(ms)s carries a margin for that.
SELECT setval('{schema}.events_waited_until',
              greatest(w.last_value,
                       (extract(epoch FROM clock_timestamp()) * 1000)::bigint + %(ms)s))
FROM {schema}.events_waited_until w;

-- name: events_allocated
-- The highest event id handed out, committed or not (a sequence is not transactional).
SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM {schema}.events_id_seq;

-- name: events_writers
-- Run after events_allocated, as its own statement: the transactions that may hold an event id
-- up to that value uncommitted. A transaction takes RowExclusiveLock on events (its trigger's
-- INSERT) before the id is drawn, and keeps it until it ends; so only these are waited for,
-- not every transaction of the cluster (another database's long transaction holds nothing;
-- relation OIDs are per database, hence the database filter).
SELECT coalesce(array_agg(l.virtualtransaction), '{}')
FROM pg_locks l
WHERE l.locktype = 'relation' AND l.relation = '{schema}.events'::regclass
  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND l.mode = 'RowExclusiveLock' AND l.pid <> pg_backend_pid();

-- name: events_settled
-- Whether every transaction of events_writers has ended (committed or rolled back).
SELECT NOT EXISTS (
    SELECT 1 FROM pg_locks l
    WHERE l.locktype = 'relation' AND l.relation = '{schema}.events'::regclass
      AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
      AND l.mode = 'RowExclusiveLock' AND l.virtualtransaction = ANY(%(writers)s::text[])
);

-- name: events_after
SELECT (SELECT upto FROM {schema}.event_trim) AS upto, e.id, e.job_id, e.task, e.queue, e.key,
       e.status, e.at, e.progress
FROM (SELECT 1) AS one
LEFT JOIN LATERAL (
    SELECT * FROM {schema}.events e
    WHERE e.id > %(after)s AND e.id <= %(bound)s
    ORDER BY e.id
    LIMIT %(limit)s
) AS e ON true;

-- name: key_events_after
SELECT (SELECT upto FROM {schema}.event_trim) AS upto, e.id, e.job_id, e.task, e.queue, e.key,
       e.status, e.at, e.progress
FROM (SELECT 1) AS one
LEFT JOIN LATERAL (
    SELECT * FROM {schema}.events e
    WHERE e.key = %(key)s AND e.id > %(after)s AND e.id <= %(bound)s
    ORDER BY e.key, e.id
    LIMIT %(limit)s
) AS e ON true;

-- name: purge_groups_events
-- In purge's transaction: groups complete for longer than their retention (with their counted
-- members), and events beyond the newest %(keep_count)s or older than %(keep_age)s seconds by
-- the database clock, at most %(limit)s per call; event_trim.upto records the highest id
-- deleted.
WITH old_groups AS (
    DELETE FROM {schema}.groups g WHERE g.expire_at <= %(now)s RETURNING g.id
),
old_settled AS (
    DELETE FROM {schema}.group_settled s WHERE s.group_id IN (SELECT id FROM old_groups)
),
bound AS (
    SELECT least(
        greatest(
            (SELECT coalesce(max(id), 0) FROM {schema}.events) - %(keep_count)s,
            coalesce((SELECT e.id FROM {schema}.events e
                      WHERE e.at >= extract(epoch FROM clock_timestamp()) - %(keep_age)s
                      ORDER BY e.id LIMIT 1) - 1,
                     (SELECT coalesce(max(id), 0) FROM {schema}.events))
        ),
        (SELECT coalesce(min(id), 0) FROM {schema}.events) + %(limit)s
    ) AS upto
),
trimmed AS (
    DELETE FROM {schema}.events e USING bound b WHERE e.id <= b.upto
)
UPDATE {schema}.event_trim t SET upto = greatest(t.upto, b.upto) FROM bound b;


-- Webhooks (0006_webhooks.sql).

-- name: insert_webhook
INSERT INTO {schema}.webhooks (digest, task, queue, payload, key, priority, delay, created_at)
VALUES (%(digest)s, %(task)s, %(queue)s, %(payload)s, %(key)s, %(priority)s, %(delay)s,
        %(created_at)s)
ON CONFLICT (digest) DO NOTHING
RETURNING 1;

-- name: get_webhook
SELECT digest, task, queue, payload, key, priority, delay, created_at
FROM {schema}.webhooks WHERE digest = %(digest)s;

-- name: delete_webhook
DELETE FROM {schema}.webhooks WHERE digest = %(digest)s
RETURNING 1;

-- Dependencies (duly.backends.dependencies, migrations/0015_dependencies.sql: the trigger
-- releases and cancels dependents; these store them and read).

-- name: dependency_lock
-- First statement of enqueue_after: the stored dependencies, locked FOR SHARE in id order, so
-- none ends (its trigger would miss the rows this transaction adds) before it commits; with
-- their depth (1: a job that waits for none).
SELECT j.id, coalesce(w.depth, 1) FROM {schema}.jobs j
LEFT JOIN {schema}.job_waits w ON w.job_id = j.id
WHERE j.id = ANY(%(ids)s::text[])
ORDER BY j.id
FOR SHARE OF j;

-- name: dependency_wait
-- After `enqueue` stored the dependents `scheduled` for +inf, all of them in one statement (the
-- ids, pipe_froms and depths in step; a link per (link_after, link_job) pair): their links,
-- and each one's row (its dependencies not succeeded yet, its chain input if that one
-- succeeded already, the first one already failed or cancelled); then queued at once (none
-- waiting), cancelled at once (a dependency failed or was cancelled: as the trigger would
-- have), or left waiting with no due time. One that waits for another of them cancelled here
-- is cancelled by the trigger at the end of this statement, as it would have been later.
-- Returns their status and queue.
WITH links AS (
    INSERT INTO {schema}.job_after (after_id, job_id)
    SELECT DISTINCT l.after_id, l.job_id
    FROM unnest(%(link_after)s::text[], %(link_job)s::text[]) AS l(after_id, job_id)
    ON CONFLICT DO NOTHING
    RETURNING 1
),
deps AS (
    SELECT DISTINCT l.job_id, d.id, d.task, d.status, d.result
    FROM unnest(%(link_after)s::text[], %(link_job)s::text[]) AS l(after_id, job_id)
    JOIN {schema}.jobs d ON d.id = l.after_id
),
cause AS (
    SELECT DISTINCT ON (d.job_id) d.job_id, d.id, d.task, d.status FROM deps d
    WHERE d.status IN ('failed', 'cancelled') ORDER BY d.job_id, d.id
),
wait AS (
    INSERT INTO {schema}.job_waits
        (job_id, waiting, pipe_from, input, failed_by, retention, depth)
    SELECT n.id,
           (SELECT count(*) FROM deps d WHERE d.job_id = n.id AND d.status <> 'succeeded'),
           n.pipe_from,
           (SELECT d.result FROM deps d
            WHERE d.job_id = n.id AND d.id = n.pipe_from AND d.status = 'succeeded'),
           (SELECT c.id FROM cause c WHERE c.job_id = n.id),
           %(retention)s,
           n.depth
    FROM unnest(%(ids)s::text[], %(pipes)s::text[], %(depths)s::integer[])
         AS n(id, pipe_from, depth)
    RETURNING job_id, waiting, failed_by
)
UPDATE {schema}.jobs j
SET status = CASE WHEN w.waiting = 0 THEN 'queued'
                  WHEN w.failed_by IS NOT NULL THEN 'cancelled'
                  ELSE j.status END,
    scheduled_for = CASE WHEN w.waiting = 0 THEN j.enqueued_at END,
    position = CASE WHEN w.waiting = 0 THEN j.enqueued_at ELSE j.position END,
    finished_at = CASE WHEN w.waiting > 0 AND w.failed_by IS NOT NULL THEN %(now)s END,
    expire_at = CASE WHEN w.waiting > 0 AND w.failed_by IS NOT NULL
                     THEN %(now)s + %(retention)s END,
    unique_key = CASE WHEN w.waiting > 0 AND w.failed_by IS NOT NULL THEN NULL
                      ELSE j.unique_key END,
    errors = CASE WHEN w.waiting > 0 AND w.failed_by IS NOT NULL THEN
        convert_to(jsonb_build_array(jsonb_build_object(
            'type', 'DependencyFailed',
            'message', 'dependency ' || c.id || ' (' || c.task || ') '
                       || CASE WHEN c.status = 'failed' THEN 'failed' ELSE 'was cancelled' END,
            'traceback', '',
            'at', %(now)s::double precision,
            'attempt', 0))::text, 'UTF8')
        ELSE j.errors END
FROM wait w LEFT JOIN cause c ON c.job_id = w.job_id, (SELECT count(*) FROM links) AS linked
WHERE j.id = w.job_id
RETURNING j.status, j.queue;

-- name: dependents
SELECT a.job_id FROM {schema}.job_after a WHERE a.after_id = %(id)s ORDER BY a.job_id;

-- name: dependency_input
SELECT w.input FROM {schema}.job_waits w WHERE w.job_id = %(id)s;

-- name: dependency_wake
-- enqueue_after: a dependent queued at once wakes its queue's workers.
SELECT pg_notify(%(channel)s, %(queue)s);


-- Watches (backends/watches.py).

-- name: watch_move
-- The active job holding a unique key (jobs_unique: one at most), locked; moved to run at
-- %(at)s unless it runs, is parked, or is queued and due already. Returns the holder as it
-- was (id, status, parked), or no row.
WITH holder AS (
    SELECT j.id, j.status, j.parked
    FROM {schema}.jobs j
    WHERE j.unique_key = %(key)s AND j.status IN ('scheduled', 'queued', 'running', 'retrying')
    FOR UPDATE
),
moved AS (
    UPDATE {schema}.jobs j
    SET status = CASE WHEN j.status = 'queued' THEN 'scheduled' ELSE j.status END,
        scheduled_for = %(at)s
    FROM holder h
    WHERE j.id = h.id AND h.status <> 'running' AND NOT h.parked
      AND NOT (h.status = 'queued' AND %(at)s <= %(now)s)
    RETURNING j.id
)
SELECT h.id, h.status, h.parked, (SELECT count(*) FROM moved) FROM holder h;

-- Progress and checkpoints (0016_progress.sql, duly.backends.progress).

-- name: store_progress
-- In the heartbeat's transaction: each run's latest progress and checkpoint (parallel arrays;
-- a NULL leaves that value as stored) on its job, if still running under %(worker)s; a new
-- progress appends a `progress` event (status 'running'). Returns: events (how many).
WITH r AS (
    SELECT * FROM unnest(%(ids)s::text[], %(progress)s::bytea[], %(cursors)s::bytea[])
        AS r(id, progress, cursor)
),
stored AS (
    UPDATE {schema}.jobs j
    SET progress = coalesce(r.progress, j.progress), cursor = coalesce(r.cursor, j.cursor)
    FROM r
    WHERE j.id = r.id AND j.status = 'running' AND j.worker = %(worker)s
    RETURNING j.id, j.task, j.queue, j.key, r.progress
),
evented AS (
    INSERT INTO {schema}.events (job_id, task, queue, key, status, progress)
    SELECT s.id, s.task, s.queue, s.key, 'running', s.progress
    FROM stored s WHERE s.progress IS NOT NULL ORDER BY s.id
    RETURNING 1
)
SELECT count(*) FROM evented;

-- name: progress_notify
-- After store_progress appended events (their ids drawn): notify the events channel if a
-- reader waits (the writers' side of migrations/0007_lean_event_triggers.sql).
SELECT pg_notify(left('duly_ev_' || %(schema_name)s, 63), '')
WHERE (SELECT w.last_value FROM {schema}.events_waited_until w)
      > extract(epoch FROM clock_timestamp()) * 1000;

-- Runtime schedules and skipped ticks (0014_schedules.sql).

-- name: put_schedule
-- An upsert: the row of that name replaced whole. Returns whether it is new (xmax = 0: the
-- row was inserted, not updated).
INSERT INTO {schema}.schedules (name, task, queue, payload, priority, every, cron, tz,
                                catch_up, overlap, updated_at)
VALUES (%(name)s, %(task)s, %(queue)s, %(payload)s, %(priority)s, %(every)s, %(cron)s,
        %(tz)s, %(catch_up)s, %(overlap)s, %(updated_at)s)
ON CONFLICT (name) DO UPDATE SET
    task = excluded.task, queue = excluded.queue, payload = excluded.payload,
    priority = excluded.priority, every = excluded.every, cron = excluded.cron,
    tz = excluded.tz, catch_up = excluded.catch_up, overlap = excluded.overlap,
    updated_at = excluded.updated_at
RETURNING (xmax = 0) AS inserted;

-- name: delete_schedule
DELETE FROM {schema}.schedules WHERE name = %(name)s
RETURNING 1;

-- name: all_schedules
SELECT name, task, queue, payload, priority, every, cron, tz, catch_up, overlap, updated_at
FROM {schema}.schedules ORDER BY name;

-- name: skip_tick
-- Counted once per tick: a tick no later than the one recorded changes nothing (no row).
INSERT INTO {schema}.skipped_ticks AS s (key, count, last_tick)
VALUES (%(key)s, 1, %(tick)s)
ON CONFLICT (key) DO UPDATE SET count = s.count + 1, last_tick = excluded.last_tick
WHERE s.last_tick < excluded.last_tick
RETURNING 1;

-- name: skipped_ticks
SELECT key, count, last_tick FROM {schema}.skipped_ticks;

-- Paused queues (0012_paused_queues.sql).

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
