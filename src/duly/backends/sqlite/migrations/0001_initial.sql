-- 0001_initial: duly's SQLite schema.
--
-- Applied by SqliteBackend.migrate() inside one BEGIN IMMEDIATE transaction and recorded in
-- duly_migrations(version, title, applied_at) (created by the runner, not here). Statements are
-- split with sqlite3.complete_statement, so keep each one terminated by ";".
--
-- Invariants:
--   * every JobRecord field is a column of `jobs`; payload/result/errors are opaque BLOBs (JSON
--     bytes the backend never decodes, except to append a LostWorker error), times are REAL
--     POSIX seconds from the caller's clock;
--   * a queue is read in (priority DESC, position, id) order: `position` is the time the job
--     became claimable (enqueued_at, or scheduled_for once promoted); a job handed back
--     (recovered or released) gets enqueued_at - 1e12, below any real time, so it goes to the
--     head of its priority while handed-back jobs keep their original order among themselves;
--   * every hot path reads a partial index whose size is the number of rows it can act on.

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
    position      REAL    NOT NULL
) WITHOUT ROWID;

-- claim: the claimable jobs of one queue, in claim order.
CREATE INDEX jobs_claim ON jobs (queue, priority DESC, position, id) WHERE status = 'queued';
-- promote_due: only scheduled/retrying rows, by due time (never scans the not-yet-due tail).
CREATE INDEX jobs_due ON jobs (scheduled_for) WHERE status IN ('scheduled', 'retrying');
-- recover: only running rows, by lease expiry.
CREATE INDEX jobs_lease ON jobs (lease_until) WHERE status = 'running';
-- list_jobs(key=...): one key's jobs, newest first, without touching other jobs.
CREATE INDEX jobs_key ON jobs (key, id) WHERE key IS NOT NULL;
-- purge: finished jobs by expiry.
CREATE INDEX jobs_expire ON jobs (expire_at) WHERE expire_at IS NOT NULL;
-- list_jobs(status=...) newest first, and queue_stats over the active states.
CREATE INDEX jobs_status ON jobs (status, id);

-- Per-minute outcome counters (minute = POSIX seconds // 60), upserted in the transaction that
-- applied the outcomes (finish, recover); purge drops buckets older than 24 h.
CREATE TABLE stats (
    minute    INTEGER NOT NULL,
    task      TEXT    NOT NULL,
    queue     TEXT    NOT NULL,
    succeeded INTEGER NOT NULL DEFAULT 0,
    failed    INTEGER NOT NULL DEFAULT 0,
    retried   INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (minute, task, queue)
) WITHOUT ROWID;

-- Registered worker processes; info is a JSON object (host, pid, queues, concurrency...).
CREATE TABLE workers (
    id         TEXT PRIMARY KEY,
    started_at REAL NOT NULL,
    last_seen  REAL NOT NULL,
    info       TEXT NOT NULL DEFAULT '{}'
) WITHOUT ROWID;

-- Every queue name ever enqueued to (so queue_stats lists empty queues too).
CREATE TABLE queues (
    name TEXT PRIMARY KEY
) WITHOUT ROWID;
