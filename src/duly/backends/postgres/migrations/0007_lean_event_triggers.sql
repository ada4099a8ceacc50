-- 0007_lean_event_triggers: the triggers of 0005 without their two costs on the hot path.
--
-- Measured on batches of 16 (EXPLAIN ANALYZE of claim and finish, docs/benchmarks.md): the
-- group settlement CTE cost ~0.9 ms per status-changing statement even when no job of it has a
-- group (a plan over the transition tables is made for each call), as much as the statement
-- itself; and the NOTIFY of each statement made every claim and finish take PostgreSQL's
-- global notify lock at commit, which it holds through the commit's WAL flush, so the commits
-- of all workers were flushed one after another instead of together.
--
--   * group: the CTE runs only when the statement moved a job that has a group to succeeded,
--     failed or cancelled (a cheap scan of the new rows first). What it does is unchanged;
--   * event notify: only while an events reader waits. A reader (wait_for_events) first raises
--     events_waited_until to the database clock's epoch milliseconds at which its wait ends
--     (plus a margin), then reads the highest event id allocated, then waits for the notify.
--     A writer draws its event ids (nextval) and then reads the mark. Sequences are not
--     transactional, so in every interleaving either the reader's read sees the writer's id
--     (and does not wait) or the writer's read sees the mark (and notifies at commit). The
--     mark only ever matters while it is in the future; nothing resets it.

CREATE SEQUENCE {schema}.events_waited_until MINVALUE 0 START 0;

CREATE OR REPLACE FUNCTION {schema}.jobs_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO {schema}.events (job_id, task, queue, key, status)
    SELECT n.id, n.task, n.queue, n.key, n.status FROM new_jobs n;
    IF FOUND AND (SELECT w.last_value FROM {schema}.events_waited_until w)
                 > extract(epoch FROM clock_timestamp()) * 1000 THEN
        PERFORM pg_notify(left('duly_ev_' || TG_TABLE_SCHEMA, 63), '');
    END IF;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION {schema}.jobs_updated() RETURNS trigger LANGUAGE plpgsql AS $$
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
