-- The schema every migration applied gives (migrations/0001 .. 0009, 0015), in one file to read.
--
-- What PostgresBackend.migrate builds an empty schema from, in one transaction (then recorded as
-- every migration applied); migrations/ upgrade an existing schema. This file is kept equal to
-- their result: tests/backends/test_postgres_schema.py runs it on an empty schema and compares
-- the catalog (tables, columns, types, collations, defaults, constraints, indexes,
-- functions, triggers, sequences) with a migrated one. A migration changes this file too.
-- `{schema}` stands for the quoted schema name. Every text column compares bytewise
-- (COLLATE "C", 0008). Times are POSIX seconds from the caller's clock (double precision);
-- payload, result and errors are opaque JSON bytes.

CREATE SCHEMA IF NOT EXISTS {schema};

-- The migrations applied (created by the migration runner, before the first migration).
CREATE TABLE {schema}.schema_version (
    version    integer          PRIMARY KEY,
    title      text COLLATE "C" NOT NULL,
    applied_at timestamptz      NOT NULL DEFAULT now()
);

-- One row per job. A queue is read in (priority DESC, position, id) order: `position` is when
-- the job became claimable, enqueued_at - 1e12 for a job handed back (0001). Concurrency
-- control (0003): `unique_key` is held while the job is active; `gate` counts in `gates` while
-- it runs; a `parked` job is queued but out of the claim path until its gate frees a slot.
-- `group_id` names its group (0005).
CREATE TABLE {schema}.jobs (
    id                text COLLATE "C" PRIMARY KEY,
    task              text COLLATE "C" NOT NULL,
    queue             text COLLATE "C" NOT NULL,
    payload           bytea            NOT NULL,
    status            text COLLATE "C" NOT NULL CHECK (status IN (
                          'scheduled', 'queued', 'running', 'retrying',
                          'succeeded', 'failed', 'cancelled')),
    attempts          integer          NOT NULL DEFAULT 0,
    max_attempts      integer          NOT NULL,
    key               text COLLATE "C",
    priority          integer          NOT NULL DEFAULT 0,
    enqueued_at       double precision NOT NULL,
    scheduled_for     double precision,
    started_at        double precision,
    finished_at       double precision,
    result            bytea,
    errors            bytea,
    worker            text COLLATE "C",
    lease_until       double precision,
    lost              integer          NOT NULL DEFAULT 0,
    expire_at         double precision,
    position          double precision NOT NULL,
    unique_key        text COLLATE "C",
    unique_until      text COLLATE "C",
    unique_expires_at double precision,
    gate              text COLLATE "C",
    gate_limit        integer,
    parked            boolean          NOT NULL DEFAULT false,
    rate_slot         double precision,
    group_id          text COLLATE "C",
    expires_at        double precision,
    progress          bytea,
    cursor            bytea
);
-- One partial index per hot path, holding only the rows that path can act on.
CREATE INDEX jobs_ready ON {schema}.jobs (queue, parked, priority DESC, position, id)
    WHERE status = 'queued';
CREATE INDEX jobs_due ON {schema}.jobs (scheduled_for)
    WHERE status IN ('scheduled', 'retrying');
CREATE INDEX jobs_running ON {schema}.jobs (lease_until)
    WHERE status = 'running';
CREATE INDEX jobs_key ON {schema}.jobs (key, id)
    WHERE key IS NOT NULL;
CREATE INDEX jobs_retention ON {schema}.jobs (expire_at)
    WHERE expire_at IS NOT NULL;
CREATE INDEX jobs_status ON {schema}.jobs (status, id) WHERE status <> 'queued';
CREATE UNIQUE INDEX jobs_unique ON {schema}.jobs (unique_key)
    WHERE unique_key IS NOT NULL AND status IN ('scheduled', 'queued', 'running', 'retrying');
CREATE INDEX jobs_gated ON {schema}.jobs (gate, parked, priority DESC, position, id)
    WHERE status = 'queued' AND gate IS NOT NULL;
CREATE INDEX jobs_expiring ON {schema}.jobs (queue, expires_at)
    WHERE expires_at IS NOT NULL AND status = 'queued';

-- Per-minute outcome counters, upserted by the statement that applied the outcomes.
CREATE TABLE {schema}.stats (
    minute    bigint           NOT NULL,
    task      text COLLATE "C" NOT NULL,
    queue     text COLLATE "C" NOT NULL,
    succeeded bigint           NOT NULL DEFAULT 0,
    failed    bigint           NOT NULL DEFAULT 0,
    retried   bigint           NOT NULL DEFAULT 0,
    PRIMARY KEY (minute, task, queue)
);

CREATE TABLE {schema}.workers (
    id         text COLLATE "C" PRIMARY KEY,
    started_at double precision NOT NULL,
    last_seen  double precision NOT NULL,
    info       jsonb            NOT NULL DEFAULT '{}'
);

-- Every queue name ever enqueued to (queue_stats lists empty queues too); paused_at is set
-- while it is paused (0012).
CREATE TABLE {schema}.queues (
    name      text COLLATE "C" PRIMARY KEY,
    paused_at double precision
);

-- The running jobs of each gate.
CREATE TABLE {schema}.gates (
    key     text COLLATE "C" PRIMARY KEY,
    running integer          NOT NULL CHECK (running >= 0)
);

-- GCRA state per rate limit key; a row whose tat has passed equals no row.
CREATE TABLE {schema}.rate_limits (
    key        text COLLATE "C" PRIMARY KEY,
    tat        double precision NOT NULL,
    not_before double precision NOT NULL
);

-- One row per freshness scope (PRODUCT §7). A request is decided in Python on the row locked
-- in its transaction (duly._freshness_state.apply_request); a sync job's end updates it through
-- fresh_after, in the statement that ends the job.
CREATE TABLE {schema}.freshness (
    name          text COLLATE "C" NOT NULL,
    scope         text COLLATE "C" NOT NULL,
    max_staleness double precision NOT NULL,
    full_every    double precision NOT NULL,
    max_backoff   double precision NOT NULL,
    offset_s      double precision NOT NULL,
    jitter        double precision NOT NULL DEFAULT 0,
    last_success  double precision,
    last_attempt  double precision,
    failures      integer          NOT NULL DEFAULT 0,
    last_error    text COLLATE "C",
    next_due      double precision NOT NULL,
    requested_by  text COLLATE "C",
    job_id        text COLLATE "C",
    stale_at      double precision NOT NULL,
    -- 0010: the follow-up delta sync a touch queued while the sync ran
    follow_up          text COLLATE "C",
    follow_up_payload  bytea,
    follow_up_priority integer NOT NULL DEFAULT 0,
    PRIMARY KEY (name, scope)
);
CREATE INDEX freshness_due ON {schema}.freshness (name, next_due);
CREATE INDEX freshness_stale ON {schema}.freshness (name, stale_at);
CREATE INDEX freshness_job ON {schema}.freshness (job_id) WHERE job_id IS NOT NULL;

-- Groups (0005): counted once per member by the jobs_updated trigger.
CREATE TABLE {schema}.groups (
    id           text COLLATE "C" PRIMARY KEY,
    key          text COLLATE "C",
    created_at   double precision NOT NULL,
    total        integer          NOT NULL,
    pending      integer          NOT NULL,
    succeeded    integer          NOT NULL DEFAULT 0,
    failed       integer          NOT NULL DEFAULT 0,
    cancelled    integer          NOT NULL DEFAULT 0,
    completed_at double precision,
    retention    double precision NOT NULL,
    expire_at    double precision,
    has_callback boolean          NOT NULL,
    -- 0011: idempotent groups, current outcomes
    name         text COLLATE "C",
    members      text[],
    first_completed_at double precision
);
CREATE INDEX groups_expire ON {schema}.groups (expire_at) WHERE expire_at IS NOT NULL;
CREATE UNIQUE INDEX groups_name ON {schema}.groups (name) WHERE name IS NOT NULL;

CREATE TABLE {schema}.group_settled (
    job_id   text COLLATE "C" PRIMARY KEY,
    group_id text COLLATE "C" NOT NULL
);
CREATE INDEX group_settled_group ON {schema}.group_settled (group_id);

-- The event stream (0005), written by the triggers on jobs.
CREATE TABLE {schema}.events (
    id     bigserial        PRIMARY KEY,
    job_id text COLLATE "C" NOT NULL,
    task   text COLLATE "C" NOT NULL,
    queue  text COLLATE "C" NOT NULL,
    key    text COLLATE "C",
    status text COLLATE "C" NOT NULL,
    at     double precision NOT NULL DEFAULT extract(epoch FROM clock_timestamp()),
    progress bytea
);
CREATE INDEX events_key ON {schema}.events (key, id) WHERE key IS NOT NULL;

-- The highest event id purge deleted.
CREATE TABLE {schema}.event_trim (
    one  integer PRIMARY KEY CHECK (one = 1),
    upto bigint  NOT NULL
);
INSERT INTO {schema}.event_trim (one, upto) VALUES (1, 0);

-- Writers notify the events channel only while this mark (epoch ms) is in the future (0007).
CREATE SEQUENCE {schema}.events_waited_until MINVALUE 0 START 0;

-- Webhooks (0006), by the SHA-256 of their secret.
CREATE TABLE {schema}.webhooks (
    digest     text COLLATE "C" PRIMARY KEY,
    task       text COLLATE "C" NOT NULL,
    queue      text COLLATE "C" NOT NULL,
    payload    bytea            NOT NULL,
    key        text COLLATE "C",
    priority   integer          NOT NULL,
    delay      double precision NOT NULL,
    created_at double precision NOT NULL
);

-- Runtime schedules and skipped ticks (0014).
CREATE TABLE {schema}.schedules (
    name       text COLLATE "C" PRIMARY KEY,
    task       text COLLATE "C" NOT NULL,
    queue      text COLLATE "C" NOT NULL,
    payload    bytea            NOT NULL,
    priority   integer          NOT NULL,
    every      double precision,
    cron       text COLLATE "C",
    tz         text COLLATE "C" NOT NULL,
    catch_up   text COLLATE "C" NOT NULL,
    overlap    text COLLATE "C" NOT NULL,
    updated_at double precision NOT NULL
);

CREATE TABLE {schema}.skipped_ticks (
    key       text COLLATE "C" PRIMARY KEY,
    count     integer          NOT NULL,
    last_tick double precision NOT NULL
);

-- Freshness: a scope after its sync job's end (0004).
CREATE FUNCTION {schema}.fresh_next_baseline(now double precision, off double precision,
                                             every double precision)
RETURNS double precision LANGUAGE sql IMMUTABLE
AS $$ SELECT off + (floor((now - off) / every) + 1) * every $$;

CREATE FUNCTION {schema}.fresh_backoff(failures integer, cap double precision,
                                       jitter double precision)
RETURNS double precision LANGUAGE sql IMMUTABLE
AS $$ SELECT least(cap, 2.0 ^ least(failures - 1, 60)) * (0.5 + 0.5 * jitter) $$;

CREATE FUNCTION {schema}.fresh_error(errors bytea) RETURNS text LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
    last jsonb;
BEGIN
    last := convert_from(errors, 'UTF8')::jsonb -> -1;
    IF last IS NULL OR jsonb_typeof(last) <> 'object' THEN
        RETURN NULL;
    END IF;
    RETURN coalesce(last ->> 'type', 'Error') || ': ' || coalesce(last ->> 'message', '');
EXCEPTION WHEN others THEN
    RETURN NULL;
END
$$;

CREATE FUNCTION {schema}.fresh_after(f {schema}.freshness, status text,
                                     started double precision, errors bytea,
                                     now double precision)
RETURNS {schema}.freshness LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
    f.last_attempt := coalesce(started, f.last_attempt);
    IF status = 'succeeded' THEN
        f.last_success := coalesce(started, now);
        f.stale_at := f.last_success + f.max_staleness;
        f.failures := 0;
        f.last_error := NULL;
        f.next_due := {schema}.fresh_next_baseline(now, f.offset_s, f.full_every);
        -- 0010: the follow-up a touch queued while the sync ran becomes the scope's sync
        -- (the finish statement inserts its job: follow_up_payload, follow_up_priority).
        f.job_id := f.follow_up;
        f.requested_by := CASE WHEN f.follow_up IS NULL THEN f.requested_by ELSE 'touch' END;
        f.follow_up := NULL;
    ELSIF status IN ('failed', 'retrying') THEN
        f.failures := f.failures + 1;
        f.last_error := coalesce({schema}.fresh_error(errors), f.last_error);
        IF status = 'failed' THEN
            f.next_due := now + {schema}.fresh_backoff(f.failures, f.max_backoff, f.jitter);
            f.job_id := NULL;
            f.follow_up := NULL;
        END IF;
    ELSIF status = 'cancelled' THEN
        f.last_error := 'cancelled';
        f.job_id := NULL;
        f.follow_up := NULL;
    END IF;
    RETURN f;
END
$$;

-- Events and groups: statement-level triggers on jobs (0005, as 0007 and 0011 replaced their
-- functions).
CREATE FUNCTION {schema}.jobs_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO {schema}.events (job_id, task, queue, key, status)
    SELECT n.id, n.task, n.queue, n.key, n.status FROM new_jobs n;
    IF FOUND AND (SELECT w.last_value FROM {schema}.events_waited_until w)
                 > extract(epoch FROM clock_timestamp()) * 1000 THEN
        PERFORM pg_notify(left('duly_ev_' || TG_TABLE_SCHEMA, 63), '');
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER jobs_inserted AFTER INSERT ON {schema}.jobs
REFERENCING NEW TABLE AS new_jobs
FOR EACH STATEMENT EXECUTE FUNCTION {schema}.jobs_inserted();

CREATE FUNCTION {schema}.jobs_updated() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    woken text;
BEGIN
    INSERT INTO {schema}.events (job_id, task, queue, key, status)
    SELECT n.id, n.task, n.queue, n.key, n.status
    FROM new_jobs n JOIN old_jobs o ON o.id = n.id
    WHERE n.status <> o.status
    ORDER BY n.id;
    IF NOT FOUND THEN
        RETURN NULL;  -- no status changed (a heartbeat, a parked job...): nothing to do
    END IF;
    IF (SELECT w.last_value FROM {schema}.events_waited_until w)
       > extract(epoch FROM clock_timestamp()) * 1000 THEN
        PERFORM pg_notify(left('duly_ev_' || TG_TABLE_SCHEMA, 63), '');
    END IF;
    IF EXISTS (
        SELECT 1 FROM new_jobs n
        WHERE n.group_id IS NOT NULL AND n.status IN ('scheduled', 'queued', 'running', 'retrying')
    ) THEN
        -- 0011: a counted member back in an active state (an operator retry) takes its
        -- outcome back: pending again, the group not complete until it ends again.
        WITH unsettled AS (
            DELETE FROM {schema}.group_settled s
            USING new_jobs n JOIN old_jobs o ON o.id = n.id
            WHERE s.job_id = n.id AND n.group_id IS NOT NULL
              AND o.status IN ('succeeded', 'failed', 'cancelled')
              AND n.status IN ('scheduled', 'queued', 'running', 'retrying')
            RETURNING s.job_id, s.group_id
        ),
        counts AS (
            SELECT u.group_id,
                   count(*) AS n,
                   count(*) FILTER (WHERE o.status = 'succeeded') AS ok,
                   count(*) FILTER (WHERE o.status = 'failed') AS bad,
                   count(*) FILTER (WHERE o.status = 'cancelled') AS stopped
            FROM unsettled u JOIN old_jobs o ON o.id = u.job_id
            GROUP BY u.group_id
        ),
        locked AS MATERIALIZED (
            SELECT g.id FROM {schema}.groups g
            WHERE g.id IN (SELECT group_id FROM counts)
            ORDER BY g.id
            FOR UPDATE
        )
        UPDATE {schema}.groups g
        SET pending = g.pending + c.n,
            succeeded = g.succeeded - c.ok,
            failed = g.failed - c.bad,
            cancelled = g.cancelled - c.stopped,
            completed_at = NULL,
            expire_at = NULL
        FROM counts c JOIN locked l ON l.id = c.group_id
        WHERE g.id = c.group_id;
    END IF;
    IF NOT EXISTS (
        SELECT 1 FROM new_jobs n
        WHERE n.group_id IS NOT NULL AND n.status IN ('succeeded', 'failed', 'cancelled')
    ) THEN
        RETURN NULL;  -- no group member settled: the CTE below would find nothing
    END IF;
    FOR woken IN
        WITH settled AS (
            INSERT INTO {schema}.group_settled (job_id, group_id)
            SELECT n.id, n.group_id
            FROM new_jobs n JOIN old_jobs o ON o.id = n.id
            WHERE n.group_id IS NOT NULL AND n.status <> o.status
              AND n.status IN ('succeeded', 'failed', 'cancelled')
            ORDER BY n.id
            ON CONFLICT (job_id) DO NOTHING
            RETURNING job_id, group_id
        ),
        counts AS (
            SELECT s.group_id,
                   count(*) AS n,
                   count(*) FILTER (WHERE j.status = 'succeeded') AS ok,
                   count(*) FILTER (WHERE j.status = 'failed') AS bad,
                   count(*) FILTER (WHERE j.status = 'cancelled') AS stopped,
                   max(j.finished_at) AS at
            FROM settled s JOIN new_jobs j ON j.id = s.job_id
            GROUP BY s.group_id
        ),
        locked AS MATERIALIZED (
            SELECT g.id FROM {schema}.groups g
            WHERE g.id IN (SELECT group_id FROM counts)
            ORDER BY g.id
            FOR UPDATE
        ),
        done AS (
            UPDATE {schema}.groups g
            SET pending = g.pending - c.n,
                succeeded = g.succeeded + c.ok,
                failed = g.failed + c.bad,
                cancelled = g.cancelled + c.stopped,
                completed_at = CASE WHEN g.pending = c.n THEN c.at END,
                first_completed_at = coalesce(g.first_completed_at,
                                              CASE WHEN g.pending = c.n THEN c.at END),
                expire_at = CASE WHEN g.pending = c.n THEN c.at + g.retention END
            FROM counts c JOIN locked l ON l.id = c.group_id
            WHERE g.id = c.group_id
            RETURNING g.id, g.pending, g.has_callback, g.completed_at
        ),
        queued AS (
            UPDATE {schema}.jobs j
            SET status = 'queued', scheduled_for = d.completed_at
            FROM done d
            WHERE j.id = d.id AND d.pending = 0 AND d.has_callback
              AND j.status = 'scheduled' AND j.scheduled_for IS NULL
            RETURNING j.queue
        )
        SELECT DISTINCT queue FROM queued
    LOOP
        PERFORM pg_notify('duly_' || TG_TABLE_SCHEMA, woken);
    END LOOP;
    RETURN NULL;
END $$;

CREATE TRIGGER jobs_updated AFTER UPDATE ON {schema}.jobs
REFERENCING OLD TABLE AS old_jobs NEW TABLE AS new_jobs
FOR EACH STATEMENT EXECUTE FUNCTION {schema}.jobs_updated();

-- Dependencies (0015): a dependent waits in job_waits, one job_after row per dependency; the
-- jobs_updated_dependencies trigger releases or cancels it in the statement that ends its
-- dependency (after jobs_updated: triggers of one event fire in name order). depth (0017): the
-- dependent's depth, which enqueue caps (duly.backends.dependencies.MAX_DEPTH).
CREATE TABLE {schema}.job_after (
    after_id text COLLATE "C" NOT NULL,
    job_id   text COLLATE "C" NOT NULL,
    PRIMARY KEY (after_id, job_id)
);
CREATE INDEX job_after_job ON {schema}.job_after (job_id);

CREATE TABLE {schema}.job_waits (
    job_id    text COLLATE "C" PRIMARY KEY,
    waiting   integer          NOT NULL,
    pipe_from text COLLATE "C",
    input     bytea,
    failed_by text COLLATE "C",
    retention double precision NOT NULL,
    depth     integer          NOT NULL DEFAULT 2
);

CREATE FUNCTION {schema}.jobs_dependencies() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    woken text;
    waiters text[];
    released_at double precision;
BEGIN
    IF NOT EXISTS (
        SELECT 1 FROM new_jobs n WHERE n.status IN ('succeeded', 'failed', 'cancelled')
    ) OR NOT EXISTS (
        SELECT 1 FROM new_jobs n JOIN {schema}.job_after a ON a.after_id = n.id
        WHERE n.status IN ('succeeded', 'failed', 'cancelled')
    ) THEN
        RETURN NULL;  -- no dependency ended: nothing to do
    END IF;
    SELECT array_agg(DISTINCT a.job_id ORDER BY a.job_id), max(n.finished_at)
    INTO waiters, released_at
    FROM new_jobs n JOIN old_jobs o ON o.id = n.id
    JOIN {schema}.job_after a ON a.after_id = n.id
    WHERE n.status = 'succeeded' AND o.status <> 'succeeded';
    IF waiters IS NOT NULL THEN
        PERFORM 1 FROM {schema}.job_waits w
        WHERE w.job_id = ANY (waiters) ORDER BY w.job_id FOR UPDATE;
        UPDATE {schema}.job_waits w
        SET waiting = w.waiting - c.n,
            input = coalesce(
                (SELECT p.result FROM new_jobs p JOIN old_jobs q ON q.id = p.id
                 WHERE p.id = w.pipe_from AND p.status = 'succeeded'
                   AND q.status <> 'succeeded'),
                w.input)
        FROM (SELECT a.job_id, count(*) AS n
              FROM new_jobs n JOIN old_jobs o ON o.id = n.id
              JOIN {schema}.job_after a ON a.after_id = n.id
              WHERE n.status = 'succeeded' AND o.status <> 'succeeded'
              GROUP BY a.job_id) c
        WHERE w.job_id = c.job_id;
        FOR woken IN
            WITH released AS (
                UPDATE {schema}.jobs j
                SET status = 'queued', scheduled_for = released_at, position = released_at,
                    finished_at = NULL, expire_at = NULL
                FROM {schema}.job_waits w
                WHERE w.job_id = j.id AND j.id = ANY (waiters) AND w.waiting = 0
                  AND ((j.status = 'scheduled' AND j.scheduled_for IS NULL)
                       OR (j.status = 'cancelled' AND w.failed_by IS NOT NULL))
                RETURNING j.id, j.queue
            ),
            cleared AS (
                UPDATE {schema}.job_waits w SET failed_by = NULL
                FROM released r WHERE w.job_id = r.id AND w.failed_by IS NOT NULL
                RETURNING 1
            )
            SELECT DISTINCT queue FROM released
        LOOP
            PERFORM pg_notify('duly_' || TG_TABLE_SCHEMA, woken);
        END LOOP;
    END IF;
    WITH failing AS (
        SELECT n.id, n.task, n.status, n.finished_at
        FROM new_jobs n JOIN old_jobs o ON o.id = n.id
        WHERE n.status IN ('failed', 'cancelled') AND o.status <> n.status
    ),
    marked AS (
        UPDATE {schema}.job_waits w SET failed_by = f.id
        FROM failing f
        JOIN {schema}.job_after a ON a.after_id = f.id
        JOIN {schema}.jobs j ON j.id = a.job_id
        WHERE w.job_id = a.job_id AND j.status = 'scheduled' AND j.scheduled_for IS NULL
        RETURNING w.job_id, w.retention, f.id AS cause, f.task AS cause_task,
                  f.status AS cause_status, f.finished_at AS at
    )
    UPDATE {schema}.jobs j
    SET status = 'cancelled', finished_at = m.at, unique_key = NULL,
        expire_at = m.at + m.retention,
        errors = convert_to((
            coalesce(convert_from(j.errors, 'UTF8')::jsonb, '[]'::jsonb)
            || jsonb_build_array(jsonb_build_object(
                'type', 'DependencyFailed',
                'message', 'dependency ' || m.cause || ' (' || m.cause_task || ') '
                           || CASE WHEN m.cause_status = 'failed' THEN 'failed'
                                   ELSE 'was cancelled' END,
                'traceback', '',
                'at', m.at,
                'attempt', j.attempts))
        )::text, 'UTF8')
    FROM marked m
    WHERE j.id = m.job_id AND j.status = 'scheduled' AND j.scheduled_for IS NULL;
    RETURN NULL;
END $$;

CREATE TRIGGER jobs_updated_dependencies AFTER UPDATE ON {schema}.jobs
REFERENCING OLD TABLE AS old_jobs NEW TABLE AS new_jobs
FOR EACH STATEMENT EXECUTE FUNCTION {schema}.jobs_dependencies();

CREATE FUNCTION {schema}.jobs_deleted_dependencies() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM {schema}.job_after a USING old_jobs o WHERE a.after_id = o.id;
    DELETE FROM {schema}.job_after a USING old_jobs o WHERE a.job_id = o.id;
    DELETE FROM {schema}.job_waits w USING old_jobs o WHERE w.job_id = o.id;
    RETURN NULL;
END $$;

CREATE TRIGGER jobs_deleted_dependencies AFTER DELETE ON {schema}.jobs
REFERENCING OLD TABLE AS old_jobs
FOR EACH STATEMENT EXECUTE FUNCTION {schema}.jobs_deleted_dependencies();
