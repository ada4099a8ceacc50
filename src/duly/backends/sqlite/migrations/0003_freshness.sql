-- 0003_freshness: one row per freshness scope (PRODUCT §7; see duly.freshness_state).
--
-- Invariants:
--   * job_id names the scope's one active sync job; it is set only by the transaction that
--     inserts that job (freshness.sql `fresh_*`) and cleared by the transaction that ends it
--     (finish, recover, cancel), so at most one sync per scope is ever active;
--   * stale_at = last_success + max_staleness (-1e18 when never synced): the scopes of one
--     freshness stalest first, and the stale ones (stale_at <= now) without a scan;
--   * next_due: the next baseline, or the end of a failure backoff; the sweep reads
--     freshness_due up to now only, per freshness.
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
    PRIMARY KEY (name, scope)
) WITHOUT ROWID;

CREATE INDEX freshness_due ON freshness (name, next_due);
CREATE INDEX freshness_stale ON freshness (name, stale_at);
CREATE INDEX freshness_job ON freshness (job_id) WHERE job_id IS NOT NULL;
