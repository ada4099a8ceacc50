-- 0013_expiry: a job's expiry before start (options(expires=), PRODUCT §15).
--
-- Invariant: a job whose expires_at has passed never starts: claim's candidates leave it out
-- (in the statement that starts jobs), and report it (through jobs_expiring, which holds only
-- queued jobs with an expiry); the claimer then ends it as cancel does, with a JobExpired
-- error, in a transaction of its own (expire_job). Should the claimer die in between, the next
-- claim finds it again.
ALTER TABLE {schema}.jobs ADD COLUMN expires_at double precision;

CREATE INDEX jobs_expiring ON {schema}.jobs (queue, expires_at)
    WHERE expires_at IS NOT NULL AND status = 'queued';
