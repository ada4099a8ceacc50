-- PostgreSQL named queries: freshness scopes (PRODUCT §7). Conventions: README.md beside this
-- file. A request's rule is duly._freshness_state.apply_request, applied in Python between
-- fresh_lock and fresh_store in one transaction (_freshness.py); what a sync's end does to its
-- scope is the function fresh_after (migrations/0004_freshness.sql), called by finish, recover
-- and fresh_cancelled in the statement that ends the job.

-- name: fresh_lock
-- First statement of a freshness sync's transaction: the row of each scope asked about (each
-- once), created when missing (next_due its first baseline, never synced) and locked, in
-- (name, scope) order so two syncs lock rows in one order. ON CONFLICT DO UPDATE locks the row
-- and returns its latest committed version (as rate_lock), so concurrent requests on a scope
-- queue here and the later ones see the sync the first one stored.
-- Returns one row per scope: name, scope, last_success, last_attempt, failures, last_error,
-- next_due, requested_by, job_id, jitter, running (its sync runs now, as of the statement's
-- snapshot: a touch then queues a follow-up; a sync whose end committed meanwhile left the
-- row, which this statement reads at its latest), follow_up.
INSERT INTO {schema}.freshness AS t (name, scope, max_staleness, full_every, max_backoff,
                                     offset_s, jitter, next_due, stale_at)
SELECT n.name, n.scope, n.ms, n.fe, n.mb, n.off, n.jitter, n.next_due, -1e18
FROM unnest(%(names)s::text[], %(scopes)s::text[], %(ms)s::double precision[],
            %(fe)s::double precision[], %(mb)s::double precision[],
            %(off)s::double precision[], %(jitter)s::double precision[],
            %(next_due)s::double precision[])
     AS n(name, scope, ms, fe, mb, off, jitter, next_due)
ORDER BY n.name, n.scope
ON CONFLICT (name, scope) DO UPDATE SET name = t.name
RETURNING t.name, t.scope, t.last_success, t.last_attempt, t.failures, t.last_error,
          t.next_due, t.requested_by, t.job_id, t.jitter,
          coalesce((SELECT j.status = 'running' FROM {schema}.jobs j WHERE j.id = t.job_id),
                   false),
          t.follow_up;

-- name: fresh_store
-- Last statement of a freshness sync's transaction: each scope's row after its requests
-- (duly._freshness_state.apply_request): the policy of its last request, next_due, and the
-- sync that is now active; a follow-up a touch queued (its id, delta payload, priority; a NULL
-- id keeps the row's).
UPDATE {schema}.freshness t
SET max_staleness = n.ms, full_every = n.fe, max_backoff = n.mb, offset_s = n.off,
    jitter = n.jitter, next_due = n.next_due, requested_by = n.requested_by, job_id = n.job_id,
    stale_at = n.stale_at,
    follow_up = coalesce(n.fu, t.follow_up),
    follow_up_payload = CASE WHEN n.fu IS NULL THEN t.follow_up_payload ELSE n.fu_payload END,
    follow_up_priority = CASE WHEN n.fu IS NULL THEN t.follow_up_priority
                              ELSE n.fu_priority END
FROM unnest(%(names)s::text[], %(scopes)s::text[], %(ms)s::double precision[],
            %(fe)s::double precision[], %(mb)s::double precision[],
            %(off)s::double precision[], %(jitter)s::double precision[],
            %(next_due)s::double precision[], %(requested_by)s::text[], %(job_ids)s::text[],
            %(stale_at)s::double precision[], %(fu)s::text[], %(fu_payload)s::bytea[],
            %(fu_priority)s::integer[])
     AS n(name, scope, ms, fe, mb, off, jitter, next_due, requested_by, job_id, stale_at, fu,
          fu_payload, fu_priority)
WHERE t.name = n.name AND t.scope = n.scope;

-- name: fresh_cancelled
-- After a cancel, in its transaction: the scope whose sync it cancelled (a waiting job; a
-- running one ends later, in finish or recover).
UPDATE {schema}.freshness f
SET (last_error, job_id, follow_up) = (
        SELECT x.last_error, x.job_id, x.follow_up
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

-- name: fresh_forget
-- The scope's row is all there is of it (its next_due is its due entry): deleting it forgets it.
-- Returns: one row when it existed.
DELETE FROM {schema}.freshness WHERE name = %(name)s AND scope = %(scope)s RETURNING 1;
