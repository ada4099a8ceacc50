-- PostgreSQL named queries: due jobs promoted, lost jobs recovered, worker registry, retention
-- purge. Conventions: README.md beside this file.

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
