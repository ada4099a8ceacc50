-- 0002_concurrency: unique holds, gates and rate slots (PRODUCT §4; see duly.backends.base).
--
-- Applied like 0001 (one BEGIN IMMEDIATE transaction, statements split on ";").
--
-- Invariants:
--   * unique hold: a job holds `unique_key` while it is active (scheduled, queued, running,
--     retrying); the partial UNIQUE index jobs_unique makes the database refuse a second active
--     holder. A hold that ends before the job does (unique_until = 'start' at claim, or an expired
--     hold taken over by a later enqueue) sets unique_key to NULL; a finished job keeps its key
--     (outside the index) so an operator retry can take it again;
--   * gate: the holders of a gate's slots are exactly its running jobs (jobs_gate counts them), so
--     a slot lives and dies with its holder's lease. `parked = 1` only on a queued job that claim
--     found with its gate full: it leaves the ready index (jobs_claim) for jobs_parked until a
--     slot of its gate frees (every way out of running, in the same transaction, unparks the best
--     ones). Cancel resets `parked`, so every other way into queued finds it at 0;
--   * plain jobs (no unique key, no gate) have no entry in any of the new indexes.

ALTER TABLE jobs ADD COLUMN unique_key TEXT;
ALTER TABLE jobs ADD COLUMN unique_until TEXT NOT NULL DEFAULT 'finish'
    CHECK (unique_until IN ('start', 'finish'));
ALTER TABLE jobs ADD COLUMN unique_expires_at REAL;
ALTER TABLE jobs ADD COLUMN gate TEXT;
ALTER TABLE jobs ADD COLUMN gate_limit INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN parked INTEGER NOT NULL DEFAULT 0 CHECK (parked IN (0, 1));
-- The start of a rate-limit slot the job already holds (set by a release, cleared by any other
-- outcome).
ALTER TABLE jobs ADD COLUMN rate_slot REAL;

-- enqueue / retry: the one active holder of a unique key.
CREATE UNIQUE INDEX jobs_unique ON jobs (unique_key)
    WHERE unique_key IS NOT NULL AND status IN ('scheduled', 'queued', 'running', 'retrying');

-- claim: the ready index no longer holds parked jobs.
DROP INDEX jobs_claim;
CREATE INDEX jobs_claim ON jobs (queue, priority DESC, position, id)
    WHERE status = 'queued' AND parked = 0;

-- claim / unpark: how many slots of a gate are taken (its running jobs).
CREATE INDEX jobs_gate ON jobs (gate) WHERE status = 'running' AND gate IS NOT NULL;

-- unpark: a gate's parked jobs in claim order.
CREATE INDEX jobs_parked ON jobs (gate, priority DESC, position, id) WHERE parked = 1;

-- reserve_rate: one GCRA state per key. `tat` is the theoretical arrival time of the key's next
-- slot; `not_before` the latest "not before" pushed on the key (no slot starts before it). A row
-- whose tat has passed means nothing (not_before <= tat always) and purge deletes it.
CREATE TABLE rate_limits (
    key        TEXT PRIMARY KEY,
    tat        REAL NOT NULL,
    not_before REAL NOT NULL DEFAULT 0
) WITHOUT ROWID;
