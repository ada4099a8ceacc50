-- 0009_expiry: a job's expiry before start (options(expires=), PRODUCT §15).
--
-- Invariant: a job whose expires_at has passed never starts. Every claim first ends the
-- expired queued jobs of the queues it reads (claim_expired, through jobs_expiring: only jobs
-- with an expiry are in it), as cancel does, with a JobExpired error, in the claim's
-- transaction; so no claim can take one.
ALTER TABLE jobs ADD COLUMN expires_at REAL;

CREATE INDEX jobs_expiring ON jobs (queue, expires_at)
    WHERE expires_at IS NOT NULL AND status = 'queued';
