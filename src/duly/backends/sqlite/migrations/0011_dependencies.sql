-- 0011_dependencies: jobs that wait for other jobs (PRODUCT §16, duly.backends.dependencies).
--
-- Applied like 0001 (one BEGIN IMMEDIATE transaction, statements split on ";"; a trigger body
-- is one statement).
--
-- A dependent has one `job_waits` row (how many of its dependencies have not succeeded yet,
-- the chain input, the dependency that cancelled it) and one `job_after` row per dependency.
-- While it waits it is `scheduled` with scheduled_for NULL, which no promotion reads. Triggers
-- on `jobs` do the rest in the transaction of whichever statement ends a job (finish, recover,
-- cancel, an operator's action): single writer, so no two of them race.
--   * a dependency reaching `succeeded` counts once in each dependent (a job succeeds at most
--     once); the dependent left with none waiting becomes `queued` (also one a dependency had
--     cancelled: failed_by set), with the chain input copied when it takes this one's result;
--   * a dependency reaching `failed` or `cancelled` cancels each dependent still waiting
--     (DependencyFailed appended to its errors, its unique hold dropped so a later release can
--     never clash, kept `retention` seconds); that cancellation fires the same trigger for the
--     dependent's own dependents (the connection sets recursive_triggers: one trigger level
--     per level of dependents);
--   * a deleted job (retention) takes its rows with it.
-- jobs_event_update is created again last: SQLite fires the newest trigger first, so a job's
-- own event comes before the events of the dependents its change releases or cancels.

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
    retention REAL    NOT NULL
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

DROP TRIGGER jobs_event_update;

CREATE TRIGGER jobs_event_update AFTER UPDATE OF status ON jobs
WHEN NEW.status <> OLD.status
BEGIN
    INSERT INTO events (job_id, task, queue, key, status, at)
    VALUES (NEW.id, NEW.task, NEW.queue, NEW.key, NEW.status,
            (julianday('now') - 2440587.5) * 86400.0);
END;
