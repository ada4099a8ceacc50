-- 0010_freshness_follow_up: a touch while a scope's sync runs queues one follow-up delta sync
-- (PRODUCT §17). The row keeps it until that sync ends: its id (follow_up), its delta payload
-- and its priority. fresh_after makes it the scope's sync when the running one succeeds (the
-- finish statement inserts its job in the same statement, `follow`), and drops it when the
-- sync fails for good or is cancelled.

ALTER TABLE {schema}.freshness ADD COLUMN follow_up text COLLATE "C";
ALTER TABLE {schema}.freshness ADD COLUMN follow_up_payload bytea;
ALTER TABLE {schema}.freshness ADD COLUMN follow_up_priority integer NOT NULL DEFAULT 0;

CREATE OR REPLACE FUNCTION {schema}.fresh_after(f {schema}.freshness, status text,
                                                started double precision, errors bytea,
                                                now double precision)
RETURNS {schema}.freshness LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
    f.last_attempt := coalesce(started, f.last_attempt);
    IF status = 'succeeded' THEN
        f.last_success := coalesce(started, now);
        f.stale_at := f.last_success + f.max_staleness;
        f.failures := 0;
        f.last_error := NULL;
        f.next_due := {schema}.fresh_next_baseline(now, f.offset_s, f.full_every);
        -- 0010: the follow-up a touch queued while the sync ran becomes the scope's sync
        -- (the finish statement inserts its job: follow_up_payload, follow_up_priority).
        f.job_id := f.follow_up;
        f.requested_by := CASE WHEN f.follow_up IS NULL THEN f.requested_by ELSE 'touch' END;
        f.follow_up := NULL;
    ELSIF status IN ('failed', 'retrying') THEN
        f.failures := f.failures + 1;
        f.last_error := coalesce({schema}.fresh_error(errors), f.last_error);
        IF status = 'failed' THEN
            f.next_due := now + {schema}.fresh_backoff(f.failures, f.max_backoff, f.jitter);
            f.job_id := NULL;
            f.follow_up := NULL;
        END IF;
    ELSIF status = 'cancelled' THEN
        f.last_error := 'cancelled';
        f.job_id := NULL;
        f.follow_up := NULL;
    END IF;
    RETURN f;
END
$$;
