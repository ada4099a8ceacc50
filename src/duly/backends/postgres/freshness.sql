-- Named freshness queries of the PostgreSQL backend (PRODUCT §7), bound like queries.sql. The
-- rules live in the functions of migrations/0004_freshness.sql.

-- name: fresh_sync
-- Each request is one fresh_request call (atomic on its scope's locked row); all in one
-- statement, in order. Returns one row per request, in order.
SELECT r.last_success, r.last_attempt, r.failures, r.last_error, r.next_due, r.requested_by,
       r.job_id, r.enqueued
FROM unnest(%(names)s::text[], %(scopes)s::text[], %(reasons)s::text[], %(active)s::boolean[],
            %(ms)s::double precision[], %(fe)s::double precision[],
            %(mb)s::double precision[], %(off)s::double precision[],
            %(jitter)s::double precision[], %(ids)s::text[], %(tasks)s::text[],
            %(queues)s::text[], %(max_attempts)s::integer[], %(keys)s::text[],
            %(priorities)s::integer[], %(full)s::bytea[], %(delta)s::bytea[])
     WITH ORDINALITY AS a(name, scope, reason, active, ms, fe, mb, off, jitter, id, task, queue,
                          max_attempts, key, priority, full_payload, delta_payload, n)
CROSS JOIN LATERAL {schema}.fresh_request(
    a.name, a.scope, a.reason, a.active, a.ms, a.fe, a.mb, a.off, a.jitter, a.id, a.task,
    a.queue, a.max_attempts, a.key, a.priority, a.full_payload, a.delta_payload,
    %(now)s::double precision, %(channel)s::text) AS r
ORDER BY a.n;

-- name: fresh_cancelled
-- After a cancel, in its transaction: the scope whose sync it cancelled (a waiting job; a
-- running one ends later, in finish or recover).
UPDATE {schema}.freshness f
SET (last_error, job_id) = (SELECT x.last_error, x.job_id
                            FROM {schema}.fresh_after(f, 'cancelled', NULL, NULL, %(now)s) x)
FROM {schema}.jobs j
WHERE f.job_id = %(id)s AND j.id = f.job_id AND j.status = 'cancelled';

-- name: fresh_due
SELECT scope FROM {schema}.freshness
WHERE name = %(name)s AND next_due <= %(now)s ORDER BY next_due LIMIT %(limit)s;

-- name: fresh_stale_count
SELECT count(*) FROM {schema}.freshness WHERE name = %(name)s AND stale_at <= %(now)s;

-- name: fresh_scope
SELECT name, scope, max_staleness, last_success, last_attempt, failures, last_error, next_due,
       requested_by, job_id
FROM {schema}.freshness WHERE name = %(name)s AND scope = %(scope)s;

-- name: fresh_scopes
SELECT name, scope, max_staleness, last_success, last_attempt, failures, last_error, next_due,
       requested_by, job_id
FROM {schema}.freshness
WHERE name = %(name)s AND stale_at <= %(top)s
ORDER BY stale_at LIMIT %(limit)s;
