-- 0007_group_names_current_outcomes: idempotent groups, and groups that count each member's
-- current outcome (PRODUCT §17).
--
-- Applied like 0001 (one BEGIN IMMEDIATE transaction, statements split on ";"; a trigger body
-- is one statement).
--   * name: the caller's id of a group (app.group(id=...)), unique among stored groups; the
--     enqueue_group transaction looks it up before storing anything (single writer: of many
--     concurrent stores of one name, one stores). `members` (a JSON list of the member ids, in
--     order) is kept for named groups only: a second store answers them even once some
--     members were purged.
--   * current outcomes: a member's outcome is counted while it lasts. group_settled holds the
--     members whose outcome is counted now; an operator retry (failed/cancelled -> queued) of
--     a counted member takes its outcome back (jobs_group_unsettle: pending again,
--     completed_at and expire_at cleared until the group completes again). The callback is
--     queued by the first completion only (first_completed_at), as before: its job is then no
--     longer `scheduled` with scheduled_for NULL, which is what the queueing UPDATE requires.
--     Groups stored before 0007 keep the counts they have (their first outcomes).
--   * jobs_event_update is created again after the group triggers: SQLite fires the newest
--     trigger first, and a member's event is written before its group's (the callback's
--     `queued` event after the member's outcome), as before.

ALTER TABLE groups ADD COLUMN name TEXT;
ALTER TABLE groups ADD COLUMN members TEXT;
ALTER TABLE groups ADD COLUMN first_completed_at REAL;
UPDATE groups SET first_completed_at = completed_at;
CREATE UNIQUE INDEX groups_name ON groups (name) WHERE name IS NOT NULL;

DROP TRIGGER jobs_group_settle;
DROP TRIGGER jobs_event_update;

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

CREATE TRIGGER jobs_event_update AFTER UPDATE OF status ON jobs
WHEN NEW.status <> OLD.status
BEGIN
    INSERT INTO events (job_id, task, queue, key, status, at)
    VALUES (NEW.id, NEW.task, NEW.queue, NEW.key, NEW.status,
            (julianday('now') - 2440587.5) * 86400.0);
END;
