-- SQLite named queries: the event stream: reads and trimming. Conventions: README.md beside this
-- file.

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
