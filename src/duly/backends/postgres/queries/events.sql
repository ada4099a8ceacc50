-- PostgreSQL named queries: the event stream: cursors, waiting writers, reads, trimming.
-- Conventions: README.md beside this file.

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
