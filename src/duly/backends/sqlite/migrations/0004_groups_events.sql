-- 0004_groups_events: groups with exactly-once completion, and the event stream (PRODUCT §8).
--
-- Applied like 0001 (one BEGIN IMMEDIATE transaction, statements split on ";"; a trigger body
-- is one statement).
--
-- Both live in triggers on `jobs`, so every statement that stores a job or changes its status
-- (enqueue, claim, finish, promote, recover, cancel, retry: whoever wrote it) does their work
-- in its own transaction, with nothing to remember in the queries:
--   * event: a new job, and every change of a job's status, appends one row to `events`. The
--     integer id increases in commit order (SQLite has one writer at a time), so a reader that
--     saw id N never later finds a new row below N. `at` is the database clock (the change's
--     time as stored). Purge trims old rows and records in `event_trim.upto` the highest id it
--     deleted, so a reader resuming below it is told (EventsTrimmed);
--   * group: a member (group_id set) reaching succeeded, failed or cancelled for the FIRST time
--     (group_settled holds one row per member counted) is counted in its `groups` row; the one
--     that leaves none pending sets completed_at (the member's finished_at: the caller's
--     clock) and turns the group's callback job (id = the group's id, stored `scheduled` with
--     scheduled_for NULL, which no promotion reads) into `queued`. Single writer: no race.

ALTER TABLE jobs ADD COLUMN group_id TEXT;

CREATE TABLE groups (
    id           TEXT    PRIMARY KEY,
    key          TEXT,
    created_at   REAL    NOT NULL,
    total        INTEGER NOT NULL,
    pending      INTEGER NOT NULL,
    succeeded    INTEGER NOT NULL DEFAULT 0,
    failed       INTEGER NOT NULL DEFAULT 0,
    cancelled    INTEGER NOT NULL DEFAULT 0,
    completed_at REAL,
    retention    REAL    NOT NULL,
    expire_at    REAL,
    has_callback INTEGER NOT NULL CHECK (has_callback IN (0, 1))
) WITHOUT ROWID;
CREATE INDEX groups_expire ON groups (expire_at) WHERE expire_at IS NOT NULL;

-- The members whose outcome their group counted (once each).
CREATE TABLE group_settled (
    job_id   TEXT PRIMARY KEY,
    group_id TEXT NOT NULL
) WITHOUT ROWID;
CREATE INDEX group_settled_group ON group_settled (group_id);

CREATE TABLE events (
    id     INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id TEXT    NOT NULL,
    task   TEXT    NOT NULL,
    queue  TEXT    NOT NULL,
    key    TEXT,
    status TEXT    NOT NULL,
    at     REAL    NOT NULL
);
-- events(key=...): one key's events in id order, without reading the others.
CREATE INDEX events_key ON events (key, id) WHERE key IS NOT NULL;

CREATE TABLE event_trim (
    one  INTEGER PRIMARY KEY CHECK (one = 1),
    upto INTEGER NOT NULL
);
INSERT INTO event_trim (one, upto) VALUES (1, 0);

-- Created before the event triggers: SQLite fires the newest trigger first, so a member's own
-- event comes before the one of the callback its outcome queues.
CREATE TRIGGER jobs_group_settle AFTER UPDATE OF status ON jobs
WHEN NEW.group_id IS NOT NULL AND NEW.status IN ('succeeded', 'failed', 'cancelled')
     AND NOT EXISTS (SELECT 1 FROM group_settled s WHERE s.job_id = NEW.id)
BEGIN
    INSERT INTO group_settled (job_id, group_id) VALUES (NEW.id, NEW.group_id);
    UPDATE groups
    SET pending = pending - 1,
        succeeded = succeeded + (NEW.status = 'succeeded'),
        failed = failed + (NEW.status = 'failed'),
        cancelled = cancelled + (NEW.status = 'cancelled'),
        completed_at = CASE WHEN pending = 1 THEN NEW.finished_at END,
        expire_at = CASE WHEN pending = 1 THEN NEW.finished_at + retention END
    WHERE id = NEW.group_id;
    UPDATE jobs
    SET status = 'queued', scheduled_for = NEW.finished_at
    WHERE id = NEW.group_id AND status = 'scheduled' AND scheduled_for IS NULL
      AND (SELECT g.pending FROM groups g WHERE g.id = NEW.group_id) = 0;
END;

CREATE TRIGGER jobs_event_insert AFTER INSERT ON jobs
BEGIN
    INSERT INTO events (job_id, task, queue, key, status, at)
    VALUES (NEW.id, NEW.task, NEW.queue, NEW.key, NEW.status,
            (julianday('now') - 2440587.5) * 86400.0);
END;

CREATE TRIGGER jobs_event_update AFTER UPDATE OF status ON jobs
WHEN NEW.status <> OLD.status
BEGIN
    INSERT INTO events (job_id, task, queue, key, status, at)
    VALUES (NEW.id, NEW.task, NEW.queue, NEW.key, NEW.status,
            (julianday('now') - 2440587.5) * 86400.0);
END;
