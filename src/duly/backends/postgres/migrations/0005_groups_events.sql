-- 0005_groups_events: groups with exactly-once completion, and the event stream (PRODUCT §8).
--
-- Both are written by statement-level triggers on `jobs` (transition tables), so every statement
-- that stores jobs or changes their status does that work in its own transaction, whoever runs
-- it (the backend's queries, or a transactional enqueue on the caller's connection):
--   * event: one `events` row per new job and per status change. Ids come from a sequence, so
--     they are allocated in statement order but may commit out of order: a reader only reads up
--     to a bound every transaction that could still commit below it has left (see read_events
--     in _groups.py). `at` is the database clock. Each statement with events notifies
--     duly_ev_<schema> (cut to 63 bytes, as PostgreSQL cuts the LISTEN name). Purge trims old
--     rows and records in event_trim.upto the highest id it deleted (a reader resuming below
--     it gets EventsTrimmed);
--   * group: a member (group_id set) reaching succeeded, failed or cancelled for the FIRST time
--     gets a group_settled row (its primary key makes the count idempotent); the group rows are
--     locked in id order (two finishing batches never deadlock) and counted; the statement that
--     leaves a group none pending sets completed_at (the member's finished_at: the caller's
--     clock) and turns the callback job (id = the group's id, `scheduled` with scheduled_for
--     NULL, which no promotion reads) into `queued`, and notifies its queue's workers.

ALTER TABLE {schema}.jobs ADD COLUMN group_id text;

CREATE TABLE {schema}.groups (
    id           text             PRIMARY KEY,
    key          text,
    created_at   double precision NOT NULL,
    total        integer          NOT NULL,
    pending      integer          NOT NULL,
    succeeded    integer          NOT NULL DEFAULT 0,
    failed       integer          NOT NULL DEFAULT 0,
    cancelled    integer          NOT NULL DEFAULT 0,
    completed_at double precision,
    retention    double precision NOT NULL,
    expire_at    double precision,
    has_callback boolean          NOT NULL
);
CREATE INDEX groups_expire ON {schema}.groups (expire_at) WHERE expire_at IS NOT NULL;

CREATE TABLE {schema}.group_settled (
    job_id   text PRIMARY KEY,
    group_id text NOT NULL
);
CREATE INDEX group_settled_group ON {schema}.group_settled (group_id);

CREATE TABLE {schema}.events (
    id     bigserial        PRIMARY KEY,
    job_id text             NOT NULL,
    task   text             NOT NULL,
    queue  text             NOT NULL,
    key    text,
    status text             NOT NULL,
    at     double precision NOT NULL DEFAULT extract(epoch FROM clock_timestamp())
);
-- events(key=...): one key's events in id order, without reading the others.
CREATE INDEX events_key ON {schema}.events (key, id) WHERE key IS NOT NULL;

CREATE TABLE {schema}.event_trim (
    one  integer PRIMARY KEY CHECK (one = 1),
    upto bigint  NOT NULL
);
INSERT INTO {schema}.event_trim (one, upto) VALUES (1, 0);

CREATE FUNCTION {schema}.jobs_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO {schema}.events (job_id, task, queue, key, status)
    SELECT n.id, n.task, n.queue, n.key, n.status FROM new_jobs n;
    IF FOUND THEN
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
    PERFORM pg_notify(left('duly_ev_' || TG_TABLE_SCHEMA, 63), '');
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
