-- 0011_group_names_current_outcomes: idempotent groups, and groups that count each member's
-- current outcome (PRODUCT §17).
--
--   * name: the caller's id of a group (app.group(id=...)), unique among stored groups
--     (groups_name). A named group's row is inserted first in its transaction, ON CONFLICT
--     (name) DO NOTHING: of concurrent stores of one name, the others wait for the first to
--     commit, store nothing and read its row. `members` (the member ids, in order) is kept for
--     named groups only, so a second store answers them even once some were purged.
--   * current outcomes: group_settled holds the members whose outcome is counted now. A
--     statement moving a counted member back to an active state (an operator retry) takes its
--     outcome back in jobs_updated (pending again; completed_at and expire_at cleared until
--     the group completes again), under the group row's lock like the settling. The callback
--     is queued by the first completion only (first_completed_at): its job is then no longer
--     `scheduled` with scheduled_for NULL, which the queueing UPDATE requires. Groups stored
--     before 0011 keep the counts they have (their first outcomes).

ALTER TABLE {schema}.groups ADD COLUMN name text COLLATE "C";
ALTER TABLE {schema}.groups ADD COLUMN members text[];
ALTER TABLE {schema}.groups ADD COLUMN first_completed_at double precision;
UPDATE {schema}.groups SET first_completed_at = completed_at;
CREATE UNIQUE INDEX groups_name ON {schema}.groups (name) WHERE name IS NOT NULL;

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

