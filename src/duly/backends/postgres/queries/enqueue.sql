-- PostgreSQL named queries: storing jobs: plain and unique batches, debounce. Conventions:
-- README.md beside this file.

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
