-- PostgreSQL named queries: recording outcomes (succeeded, failed, retry, release), freeing gate
-- slots. Conventions: README.md beside this file.

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
