-- 0003_concurrency_control: unique holds, gates and rate slots (PRODUCT §4).
--
-- Every column is added without a table rewrite (nullable, or a constant default), so the
-- migration only scans `jobs` to build the new indexes.
--
-- Unique hold: `unique_key` is held while its job is active (the partial UNIQUE index below).
-- The hold ends when the job leaves the active states (the key stays on the row, so an operator
-- retry can take it again), or when the key is set to NULL: at the first claim of a
-- `unique_until = 'start'` job, or by a later enqueue taking over a hold past
-- `unique_expires_at`. `unique_until` and `unique_expires_at` are NULL without a unique key.
--
-- Gate: `gates.running` is the number of running jobs whose `gate` is `key`; it changes in the
-- transaction that moves a gated job into or out of `running`. A queued job whose gate was full
-- when a claim reached it is `parked`: still `queued` (listed and counted as such), but out of
-- the claim path until a slot of its gate frees. Invariant: `parked` implies status 'queued'.
-- `gate_limit` is NULL without a gate.
--
-- Rate slots: `rate_limits.tat` is the GCRA theoretical arrival time of a key's next slot, and
-- `not_before` the latest time pushed on it (no slot starts before it; not_before <= tat). A row
-- whose tat has passed is equivalent to no row, and purge deletes it.

ALTER TABLE {schema}.jobs
    ADD COLUMN unique_key        text,
    ADD COLUMN unique_until      text,
    ADD COLUMN unique_expires_at double precision,
    ADD COLUMN gate              text,
    ADD COLUMN gate_limit        integer,
    ADD COLUMN parked            boolean NOT NULL DEFAULT false,
    ADD COLUMN rate_slot         double precision;

-- One active holder per unique key; also the arbiter of enqueue's ON CONFLICT DO NOTHING.
CREATE UNIQUE INDEX jobs_unique ON {schema}.jobs (unique_key)
    WHERE unique_key IS NOT NULL AND status IN ('scheduled', 'queued', 'running', 'retrying');

-- claim reads (queue, parked = false, ...) only: parked jobs sort into a range of their own that
-- no claim visits, while listing queued jobs (parked ones included) still has this one index.
DROP INDEX {schema}.jobs_ready;
CREATE INDEX jobs_ready ON {schema}.jobs (queue, parked, priority DESC, position, id)
    WHERE status = 'queued';
-- The queued jobs of one gate: a claim that finds the gate full parks its unparked ones; a
-- freed slot wakes its best parked one (priority, then queue order).
CREATE INDEX jobs_gated ON {schema}.jobs (gate, parked, priority DESC, position, id)
    WHERE status = 'queued' AND gate IS NOT NULL;

CREATE TABLE {schema}.gates (
    key     text    PRIMARY KEY,
    running integer NOT NULL CHECK (running >= 0)
);

CREATE TABLE {schema}.rate_limits (
    key        text             PRIMARY KEY,
    tat        double precision NOT NULL,
    not_before double precision NOT NULL
);
