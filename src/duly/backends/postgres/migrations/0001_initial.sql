-- 0001_initial: duly's PostgreSQL schema.
--
-- Applied by PostgresBackend.migrate() in one transaction, under a session advisory lock, and
-- recorded in {schema}.schema_version (created by the runner, not here). `{schema}` is replaced by
-- the quoted schema name (psycopg.sql.Identifier) before execution; nothing else is substituted.
-- The file runs as one simple-protocol script, so it may hold several statements.
--
-- Invariants:
--   * every JobRecord field is a column of `jobs`; payload/result/errors are opaque bytea (JSON
--     bytes the backend never decodes, except to append a LostWorker error in recover), times are
--     double precision POSIX seconds from the caller's clock;
--   * a queue is read in (priority DESC, position, id) order: `position` is the time the job
--     became claimable (enqueued_at, or scheduled_for once promoted, or the time of an operator
--     retry); a job handed back (recovered or released) gets enqueued_at - 1e12, below any real
--     time, so it goes to the head of its priority while handed-back jobs keep their original
--     order among themselves (the same rule as the SQLite backend);
--   * every hot path reads a partial index whose size is the number of rows it can act on, so
--     millions of finished rows waiting for retention never slow claiming down.

CREATE TABLE {schema}.jobs (
    id            text             PRIMARY KEY,
    task          text             NOT NULL,
    queue         text             NOT NULL,
    payload       bytea            NOT NULL,
    status        text             NOT NULL CHECK (status IN (
                      'scheduled', 'queued', 'running', 'retrying',
                      'succeeded', 'failed', 'cancelled')),
    attempts      integer          NOT NULL DEFAULT 0,
    max_attempts  integer          NOT NULL,
    key           text,
    priority      integer          NOT NULL DEFAULT 0,
    enqueued_at   double precision NOT NULL,
    scheduled_for double precision,
    started_at    double precision,
    finished_at   double precision,
    result        bytea,
    errors        bytea,
    worker        text,
    lease_until   double precision,
    lost          integer          NOT NULL DEFAULT 0,
    expire_at     double precision,
    position      double precision NOT NULL
);

-- claim: the claimable jobs of one queue, in claim order (read with FOR UPDATE SKIP LOCKED).
CREATE INDEX jobs_ready ON {schema}.jobs (queue, priority DESC, position, id)
    WHERE status = 'queued';
-- promote_due: only scheduled/retrying rows, by due time (never scans the not-yet-due tail).
CREATE INDEX jobs_due ON {schema}.jobs (scheduled_for)
    WHERE status IN ('scheduled', 'retrying');
-- recover: only running rows, by lease expiry.
CREATE INDEX jobs_running ON {schema}.jobs (lease_until)
    WHERE status = 'running';
-- list_jobs(key=...): one key's jobs, newest first, without touching other jobs.
CREATE INDEX jobs_key ON {schema}.jobs (key, id)
    WHERE key IS NOT NULL;
-- purge: finished jobs by expiry.
CREATE INDEX jobs_retention ON {schema}.jobs (expire_at)
    WHERE expire_at IS NOT NULL;
-- list_jobs(status=...) newest first.
CREATE INDEX jobs_status ON {schema}.jobs (status, id);

-- Per-minute outcome counters (minute = POSIX seconds // 60), upserted in the transaction that
-- applied the outcomes (finish, recover); purge drops buckets older than 24 h.
CREATE TABLE {schema}.stats (
    minute    bigint NOT NULL,
    task      text   NOT NULL,
    queue     text   NOT NULL,
    succeeded bigint NOT NULL DEFAULT 0,
    failed    bigint NOT NULL DEFAULT 0,
    retried   bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (minute, task, queue)
);

-- Registered worker processes; info is a JSON object (host, pid, queues, concurrency...).
CREATE TABLE {schema}.workers (
    id         text             PRIMARY KEY,
    started_at double precision NOT NULL,
    last_seen  double precision NOT NULL,
    info       jsonb            NOT NULL DEFAULT '{}'
);

-- Every queue name ever enqueued to (so queue_stats lists empty queues too).
CREATE TABLE {schema}.queues (
    name text PRIMARY KEY
);
