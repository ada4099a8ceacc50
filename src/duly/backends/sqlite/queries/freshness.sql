-- SQLite named queries: freshness scopes (PRODUCT §7). Conventions: README.md beside this file.
-- Run inside the backend's write transactions (_freshness.py). The decision rule is
-- duly.freshness_state.decide, applied in Python between fresh_read and fresh_write under the
-- same write lock.

-- name: fresh_read
-- With the row: whether its sync runs now (a touch then queues a follow-up), its follow-up.
SELECT f.last_success, f.last_attempt, f.failures, f.last_error, f.next_due, f.requested_by,
       f.job_id, f.jitter, coalesce(j.status = 'running', 0), f.follow_up
FROM freshness f LEFT JOIN jobs j ON j.id = f.job_id
WHERE f.name = :name AND f.scope = :scope;

-- name: fresh_write
-- The scope's row after a request: policy, next_due, and (when a sync was enqueued) job_id,
-- requested_by, jitter; (when a touch queued a follow-up) the follow-up's id, payload and
-- priority (:follow_up NULL keeps the row's).
INSERT INTO freshness (name, scope, max_staleness, full_every, max_backoff, offset_s, jitter,
                       next_due, requested_by, job_id, stale_at, follow_up, follow_up_payload,
                       follow_up_priority)
VALUES (:name, :scope, :max_staleness, :full_every, :max_backoff, :offset, :jitter,
        :next_due, :requested_by, :job_id, :stale_at, :follow_up, :follow_up_payload,
        coalesce(:follow_up_priority, 0))
ON CONFLICT (name, scope) DO UPDATE SET
    max_staleness = excluded.max_staleness, full_every = excluded.full_every,
    max_backoff = excluded.max_backoff, offset_s = excluded.offset_s,
    jitter = excluded.jitter, next_due = excluded.next_due,
    requested_by = excluded.requested_by, job_id = excluded.job_id,
    stale_at = excluded.stale_at,
    follow_up = coalesce(excluded.follow_up, follow_up),
    follow_up_payload = CASE WHEN excluded.follow_up IS NULL THEN follow_up_payload
                             ELSE excluded.follow_up_payload END,
    follow_up_priority = CASE WHEN excluded.follow_up IS NULL THEN follow_up_priority
                              ELSE excluded.follow_up_priority END;

-- name: fresh_ended
-- The sync job of a scope reached :status (succeeded, failed, retrying, cancelled) at :now;
-- :started its run's start, :error its last error ("type: message"), :next_baseline and
-- :backoff computed by the caller from the row (fresh_policy).
UPDATE freshness SET
    last_attempt = coalesce(:started, last_attempt),
    last_success = CASE WHEN :status = 'succeeded' THEN coalesce(:started, :now)
                        ELSE last_success END,
    stale_at = CASE WHEN :status = 'succeeded' THEN coalesce(:started, :now) + max_staleness
                    ELSE stale_at END,
    failures = CASE WHEN :status = 'succeeded' THEN 0
                    WHEN :status IN ('failed', 'retrying') THEN failures + 1
                    ELSE failures END,
    last_error = CASE WHEN :status = 'succeeded' THEN NULL
                      WHEN :status = 'cancelled' THEN 'cancelled'
                      ELSE coalesce(:error, last_error) END,
    next_due = CASE WHEN :status = 'succeeded' THEN :next_baseline
                    WHEN :status = 'failed' THEN :now + :backoff
                    ELSE next_due END,
    job_id = CASE WHEN :status = 'retrying' THEN job_id END,
    follow_up = CASE WHEN :status IN ('failed', 'cancelled') THEN NULL ELSE follow_up END
WHERE job_id = :id;

-- name: fresh_follow
-- After fresh_ended recorded a success: the follow-up (enqueued by the caller) is now the
-- scope's sync, asked for by a touch.
UPDATE freshness SET job_id = follow_up, requested_by = 'touch', follow_up = NULL
WHERE follow_up = :follow_up;

-- name: fresh_policy
-- The rows of the scopes whose sync is among :ids (JSON array), with what fresh_ended needs.
SELECT f.job_id, f.failures, f.max_backoff, f.jitter, f.offset_s, f.full_every,
       j.started_at, j.status, CAST(j.errors AS TEXT),
       f.follow_up, f.follow_up_payload, f.follow_up_priority, j.task, j.queue,
       j.max_attempts, j.key
FROM freshness f INDEXED BY freshness_job
JOIN jobs j ON j.id = f.job_id
WHERE f.job_id IN (SELECT value FROM json_each(:ids));

-- name: fresh_due
SELECT scope FROM freshness INDEXED BY freshness_due
WHERE name = :name AND next_due <= :now ORDER BY next_due LIMIT :limit;

-- name: fresh_scopes
SELECT name, scope, max_staleness, last_success, last_attempt, failures, last_error, next_due,
       requested_by, job_id
FROM freshness INDEXED BY freshness_stale
WHERE name = :name AND stale_at <= :top
ORDER BY stale_at LIMIT :limit;

-- name: fresh_scope
SELECT name, scope, max_staleness, last_success, last_attempt, failures, last_error, next_due,
       requested_by, job_id
FROM freshness WHERE name = :name AND scope = :scope;

-- name: fresh_stale_count
SELECT count(*) FROM freshness INDEXED BY freshness_stale
WHERE name = :name AND stale_at <= :now;

-- name: fresh_forget
-- The scope's row is all there is of it (its next_due is its due entry): deleting it forgets it.
DELETE FROM freshness WHERE name = :name AND scope = :scope;

-- name: fresh_drop
DELETE FROM freshness;
