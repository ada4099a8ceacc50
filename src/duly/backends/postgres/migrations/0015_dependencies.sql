-- 0015_dependencies: jobs that wait for other jobs (PRODUCT §16, duly.backends.dependencies).
--
-- A dependent has one `job_waits` row (how many of its dependencies have not succeeded yet,
-- the chain input, the dependency that cancelled it) and one `job_after` row per dependency.
-- While it waits it is `scheduled` with scheduled_for NULL, which no promotion reads. A
-- statement-level trigger on `jobs` (named to fire after jobs_updated, so a job's own event
-- comes first) does the rest in the statement that ends a job, whoever runs it:
--   * dependencies reaching `succeeded` (a job succeeds at most once) are counted in their
--     dependents' rows, locked in id order first: two transactions finishing the two last
--     dependencies of one dependent queue behind that lock, and the second one's count (READ
--     COMMITTED: a new snapshot per statement) sees the first, so exactly one of them reads 0
--     and releases it (`queued`, its queue notified; also one a dependency had cancelled,
--     failed_by set), with the chain input copied from the dependency it takes a result from;
--   * dependencies reaching `failed` or `cancelled` cancel each dependent still waiting
--     (DependencyFailed appended to its errors, unique hold dropped, kept `retention` s); that
--     UPDATE fires this trigger again for the dependents' own dependents (transitively);
--   * deleted jobs (retention) take their rows with them.
-- A dependent is stored by a transaction that first locks its dependencies FOR SHARE, so no
-- dependency changes between its read and its commit (see _dependencies.py).

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
    retention double precision NOT NULL
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
