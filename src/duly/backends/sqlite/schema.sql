-- The current schema of duly's SQLite backend: what every migration applied gives.
--
-- An empty file is built from this script in one transaction (_migrate.migrate), an existing
-- one upgraded by migrations/; tests/backends/test_sqlite_schema.py checks that replaying the
-- migrations on an empty file gives exactly this (sqlite_master compared after normalising
-- comments and whitespace, and each table's and index's columns). A new migration updates this
-- file in the same change. The invariants behind
-- each table are in the migration that introduced it. New files are also set to
-- `PRAGMA auto_vacuum = INCREMENTAL` (by the connection, before the first table exists).

-- The runner's record of applied migrations (a migration's history creates it in _migrate).
CREATE TABLE duly_migrations (
    version    INTEGER PRIMARY KEY,
    title      TEXT NOT NULL,
    applied_at REAL NOT NULL
);

-- Jobs (0001, 0002, 0004) and the partial indexes of each hot path.
CREATE TABLE jobs (
    id            TEXT PRIMARY KEY,
    task          TEXT    NOT NULL,
    queue         TEXT    NOT NULL,
    payload       BLOB    NOT NULL,
    status        TEXT    NOT NULL CHECK (status IN (
                      'scheduled', 'queued', 'running', 'retrying',
                      'succeeded', 'failed', 'cancelled')),
    attempts      INTEGER NOT NULL DEFAULT 0,
    max_attempts  INTEGER NOT NULL,
    key           TEXT,
    priority      INTEGER NOT NULL DEFAULT 0,
    enqueued_at   REAL    NOT NULL,
    scheduled_for REAL,
    started_at    REAL,
    finished_at   REAL,
    result        BLOB,
    errors        BLOB,
    worker        TEXT,
    lease_until   REAL,
    lost          INTEGER NOT NULL DEFAULT 0,
    expire_at     REAL,
    position      REAL    NOT NULL,
    -- 0002: unique holds, gates, rate slots
    unique_key    TEXT,
    unique_until  TEXT    NOT NULL DEFAULT 'finish'
                      CHECK (unique_until IN ('start', 'finish')),
    unique_expires_at REAL,
    gate          TEXT,
    gate_limit    INTEGER NOT NULL DEFAULT 0,
    parked        INTEGER NOT NULL DEFAULT 0 CHECK (parked IN (0, 1)),
    rate_slot     REAL,
    -- 0004: groups
    group_id      TEXT,
    -- 0009: expiry before start
    expires_at    REAL,
    -- 0012: progress and checkpoint
    progress      BLOB,
    cursor        BLOB
) WITHOUT ROWID;

CREATE INDEX jobs_due ON jobs (scheduled_for) WHERE status IN ('scheduled', 'retrying');
CREATE INDEX jobs_lease ON jobs (lease_until) WHERE status = 'running';
CREATE INDEX jobs_key ON jobs (key, id) WHERE key IS NOT NULL;
CREATE INDEX jobs_expire ON jobs (expire_at) WHERE expire_at IS NOT NULL;
CREATE INDEX jobs_status ON jobs (status, id);
CREATE UNIQUE INDEX jobs_unique ON jobs (unique_key)
    WHERE unique_key IS NOT NULL AND status IN ('scheduled', 'queued', 'running', 'retrying');
CREATE INDEX jobs_claim ON jobs (queue, priority DESC, position, id)
    WHERE status = 'queued' AND parked = 0;
CREATE INDEX jobs_gate ON jobs (gate) WHERE status = 'running' AND gate IS NOT NULL;
CREATE INDEX jobs_parked ON jobs (gate, priority DESC, position, id) WHERE parked = 1;
CREATE INDEX jobs_expiring ON jobs (queue, expires_at)
    WHERE expires_at IS NOT NULL AND status = 'queued';

-- Per-minute counters, workers, queue names (0001); rate-limit state (0002).
CREATE TABLE stats (
    minute    INTEGER NOT NULL,
    task      TEXT    NOT NULL,
    queue     TEXT    NOT NULL,
    succeeded INTEGER NOT NULL DEFAULT 0,
    failed    INTEGER NOT NULL DEFAULT 0,
    retried   INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (minute, task, queue)
) WITHOUT ROWID;

CREATE TABLE workers (
    id         TEXT PRIMARY KEY,
    started_at REAL NOT NULL,
    last_seen  REAL NOT NULL,
    info       TEXT NOT NULL DEFAULT '{}'
) WITHOUT ROWID;

CREATE TABLE queues (
    name TEXT PRIMARY KEY
) WITHOUT ROWID;

CREATE TABLE rate_limits (
    key        TEXT PRIMARY KEY,
    tat        REAL NOT NULL,
    not_before REAL NOT NULL DEFAULT 0
) WITHOUT ROWID;

-- Freshness scopes (0003).
CREATE TABLE freshness (
    name          TEXT    NOT NULL,
    scope         TEXT    NOT NULL,
    max_staleness REAL    NOT NULL,
    full_every    REAL    NOT NULL,
    max_backoff   REAL    NOT NULL,
    offset_s      REAL    NOT NULL,
    jitter        REAL    NOT NULL DEFAULT 0,
    last_success  REAL,
    last_attempt  REAL,
    failures      INTEGER NOT NULL DEFAULT 0,
    last_error    TEXT,
    next_due      REAL    NOT NULL,
    requested_by  TEXT,
    job_id        TEXT,
    stale_at      REAL    NOT NULL,
    -- 0006: the follow-up delta sync a touch queued while the sync ran
    follow_up          TEXT,
    follow_up_payload  BLOB,
    follow_up_priority INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (name, scope)
) WITHOUT ROWID;
CREATE INDEX freshness_due ON freshness (name, next_due);
CREATE INDEX freshness_stale ON freshness (name, stale_at);
CREATE INDEX freshness_job ON freshness (job_id) WHERE job_id IS NOT NULL;

-- Groups and the event stream (0004, 0007): the triggers write them in the transaction of the change.
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
    has_callback INTEGER NOT NULL CHECK (has_callback IN (0, 1)),
    -- 0007: idempotent groups, current outcomes
    name         TEXT,
    members      TEXT,
    first_completed_at REAL
) WITHOUT ROWID;
CREATE INDEX groups_expire ON groups (expire_at) WHERE expire_at IS NOT NULL;
CREATE UNIQUE INDEX groups_name ON groups (name) WHERE name IS NOT NULL;

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
    at     REAL    NOT NULL,
    -- 0012: a progress event's progress (JSON)
    progress BLOB
);
CREATE INDEX events_key ON events (key, id) WHERE key IS NOT NULL;

CREATE TABLE event_trim (
    one  INTEGER PRIMARY KEY CHECK (one = 1),
    upto INTEGER NOT NULL
);
INSERT INTO event_trim (one, upto) VALUES (1, 0);

-- 0007: a member's current outcome is counted (settle / unsettle).
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
        first_completed_at = coalesce(first_completed_at,
                                      CASE WHEN pending = 1 THEN NEW.finished_at END),
        expire_at = CASE WHEN pending = 1 THEN NEW.finished_at + retention END
    WHERE id = NEW.group_id;
    UPDATE jobs
    SET status = 'queued', scheduled_for = NEW.finished_at
    WHERE id = NEW.group_id AND status = 'scheduled' AND scheduled_for IS NULL
      AND (SELECT g.pending FROM groups g WHERE g.id = NEW.group_id) = 0;
END;

CREATE TRIGGER jobs_group_unsettle AFTER UPDATE OF status ON jobs
WHEN NEW.group_id IS NOT NULL AND OLD.status IN ('succeeded', 'failed', 'cancelled')
     AND NEW.status IN ('scheduled', 'queued', 'running', 'retrying')
     AND EXISTS (SELECT 1 FROM group_settled s WHERE s.job_id = NEW.id)
BEGIN
    DELETE FROM group_settled WHERE job_id = NEW.id;
    UPDATE groups
    SET pending = pending + 1,
        succeeded = succeeded - (OLD.status = 'succeeded'),
        failed = failed - (OLD.status = 'failed'),
        cancelled = cancelled - (OLD.status = 'cancelled'),
        completed_at = NULL,
        expire_at = NULL
    WHERE id = NEW.group_id;
END;

CREATE TRIGGER jobs_event_insert AFTER INSERT ON jobs
BEGIN
    INSERT INTO events (job_id, task, queue, key, status, at)
    VALUES (NEW.id, NEW.task, NEW.queue, NEW.key, NEW.status,
            (julianday('now') - 2440587.5) * 86400.0);
END;

-- Webhooks (0005).
CREATE TABLE webhooks (
    digest     TEXT    PRIMARY KEY,
    task       TEXT    NOT NULL,
    queue      TEXT    NOT NULL,
    payload    BLOB    NOT NULL,
    key        TEXT,
    priority   INTEGER NOT NULL,
    delay      REAL    NOT NULL,
    created_at REAL    NOT NULL
);

-- Paused queues (0008).
CREATE TABLE paused_queues (
    queue     TEXT PRIMARY KEY,
    paused_at REAL NOT NULL
);

-- Dependencies (0011): a dependent waits in job_waits, one job_after row per dependency; the
-- triggers release or cancel it in the transaction of its dependency's change. The connection
-- sets recursive_triggers (a cancelled dependent cancels its own). jobs_event_update (0004)
-- was created again after them, so it fires first. depth (0013): the dependent's depth, which
-- enqueue caps (duly.backends.dependencies.MAX_DEPTH).
CREATE TABLE job_after (
    after_id TEXT NOT NULL,
    job_id   TEXT NOT NULL,
    PRIMARY KEY (after_id, job_id)
) WITHOUT ROWID;
CREATE INDEX job_after_job ON job_after (job_id);

CREATE TABLE job_waits (
    job_id    TEXT    PRIMARY KEY,
    waiting   INTEGER NOT NULL,
    pipe_from TEXT,
    input     BLOB,
    failed_by TEXT,
    retention REAL    NOT NULL,
    depth INTEGER NOT NULL DEFAULT 2
) WITHOUT ROWID;

CREATE TRIGGER jobs_dependency_succeeded AFTER UPDATE OF status ON jobs
WHEN NEW.status = 'succeeded' AND OLD.status <> 'succeeded'
     AND EXISTS (SELECT 1 FROM job_after a WHERE a.after_id = NEW.id)
BEGIN
    UPDATE job_waits
    SET waiting = waiting - 1,
        input = iif(pipe_from = NEW.id, NEW.result, input)
    WHERE job_id IN (SELECT a.job_id FROM job_after a WHERE a.after_id = NEW.id);
    UPDATE jobs
    SET status = 'queued', scheduled_for = NEW.finished_at, position = NEW.finished_at,
        finished_at = NULL, expire_at = NULL
    WHERE id IN (SELECT w.job_id FROM job_after a JOIN job_waits w ON w.job_id = a.job_id
                 WHERE a.after_id = NEW.id AND w.waiting = 0)
      AND ((status = 'scheduled' AND scheduled_for IS NULL)
           OR (status = 'cancelled'
               AND (SELECT w.failed_by FROM job_waits w WHERE w.job_id = jobs.id) IS NOT NULL));
    UPDATE job_waits SET failed_by = NULL
    WHERE waiting = 0 AND failed_by IS NOT NULL
      AND job_id IN (SELECT a.job_id FROM job_after a WHERE a.after_id = NEW.id);
END;

CREATE TRIGGER jobs_dependency_failed AFTER UPDATE OF status ON jobs
WHEN NEW.status IN ('failed', 'cancelled') AND OLD.status <> NEW.status
     AND EXISTS (SELECT 1 FROM job_after a WHERE a.after_id = NEW.id)
BEGIN
    UPDATE job_waits SET failed_by = NEW.id
    WHERE job_id IN (SELECT a.job_id FROM job_after a JOIN jobs j ON j.id = a.job_id
                     WHERE a.after_id = NEW.id
                       AND j.status = 'scheduled' AND j.scheduled_for IS NULL);
    UPDATE jobs
    SET status = 'cancelled', finished_at = NEW.finished_at, unique_key = NULL,
        expire_at = NEW.finished_at
                    + (SELECT w.retention FROM job_waits w WHERE w.job_id = jobs.id),
        errors = CAST(json_insert(
            CASE WHEN json_valid(CAST(errors AS TEXT))
                      AND json_type(CAST(errors AS TEXT)) = 'array'
                 THEN CAST(errors AS TEXT) ELSE '[]' END,
            '$[#]',
            json_object('type', 'DependencyFailed',
                        'message', 'dependency ' || NEW.id || ' (' || NEW.task || ') '
                                   || iif(NEW.status = 'failed', 'failed', 'was cancelled'),
                        'traceback', '', 'at', NEW.finished_at, 'attempt', attempts)
        ) AS BLOB)
    WHERE id IN (SELECT w.job_id FROM job_after a JOIN job_waits w ON w.job_id = a.job_id
                 WHERE a.after_id = NEW.id AND w.failed_by = NEW.id)
      AND status = 'scheduled' AND scheduled_for IS NULL;
END;

CREATE TRIGGER jobs_dependency_purged AFTER DELETE ON jobs
WHEN EXISTS (SELECT 1 FROM job_after a WHERE a.after_id = OLD.id)
     OR EXISTS (SELECT 1 FROM job_waits w WHERE w.job_id = OLD.id)
BEGIN
    DELETE FROM job_after WHERE after_id = OLD.id;
    DELETE FROM job_after WHERE job_id = OLD.id;
    DELETE FROM job_waits WHERE job_id = OLD.id;
END;

CREATE TRIGGER jobs_event_update AFTER UPDATE OF status ON jobs
WHEN NEW.status <> OLD.status
BEGIN
    INSERT INTO events (job_id, task, queue, key, status, at)
    VALUES (NEW.id, NEW.task, NEW.queue, NEW.key, NEW.status,
            (julianday('now') - 2440587.5) * 86400.0);
END;

-- Runtime schedules and skipped ticks (0010).
CREATE TABLE schedules (
    name       TEXT    PRIMARY KEY,
    task       TEXT    NOT NULL,
    queue      TEXT    NOT NULL,
    payload    BLOB    NOT NULL,
    priority   INTEGER NOT NULL,
    every      REAL,
    cron       TEXT,
    tz         TEXT    NOT NULL,
    catch_up   TEXT    NOT NULL,
    overlap    TEXT    NOT NULL,
    updated_at REAL    NOT NULL
);

CREATE TABLE skipped_ticks (
    key       TEXT    PRIMARY KEY,
    count     INTEGER NOT NULL,
    last_tick REAL    NOT NULL
);
