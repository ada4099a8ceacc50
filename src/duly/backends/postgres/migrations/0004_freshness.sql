-- 0004_freshness: one row per freshness scope (PRODUCT §7; see duly.freshness_state), and the
-- functions that keep it.
--
-- Invariants:
--   * job_id names the scope's one active sync job: set only by fresh_request in the statement
--     that inserts that job (the row locked FOR UPDATE, so concurrent requests of a scope queue
--     up and the later ones find it busy), cleared by the statement that ends that job (the
--     `fresh` CTE of finish and recover, fresh_cancelled after cancel; see fresh_after);
--   * stale_at = last_success + max_staleness (-1e18 when never synced): the scopes of one
--     freshness stalest first, and the stale ones, without a scan;
--   * next_due: the next baseline, or the end of a failure backoff; the sweep reads
--     freshness_due up to now only, per freshness.
CREATE TABLE {schema}.freshness (
    name          text             NOT NULL,
    scope         text             NOT NULL,
    max_staleness double precision NOT NULL,
    full_every    double precision NOT NULL,
    max_backoff   double precision NOT NULL,
    offset_s      double precision NOT NULL,
    jitter        double precision NOT NULL DEFAULT 0,
    last_success  double precision,
    last_attempt  double precision,
    failures      integer          NOT NULL DEFAULT 0,
    last_error    text,
    next_due      double precision NOT NULL,
    requested_by  text,
    job_id        text,
    stale_at      double precision NOT NULL,
    PRIMARY KEY (name, scope)
);
CREATE INDEX freshness_due ON {schema}.freshness (name, next_due);
CREATE INDEX freshness_stale ON {schema}.freshness (name, stale_at);
CREATE INDEX freshness_job ON {schema}.freshness (job_id) WHERE job_id IS NOT NULL;

-- The first baseline time after now: offset plus a multiple of full_every.
CREATE FUNCTION {schema}.fresh_next_baseline(now double precision, off double precision,
                                             every double precision)
RETURNS double precision LANGUAGE sql IMMUTABLE
AS $$ SELECT off + (floor((now - off) / every) + 1) * every $$;

-- Seconds to wait after `failures` consecutive failures (1 s doubling, capped, jittered).
CREATE FUNCTION {schema}.fresh_backoff(failures integer, cap double precision,
                                       jitter double precision)
RETURNS double precision LANGUAGE sql IMMUTABLE
AS $$ SELECT least(cap, 2.0 ^ least(failures - 1, 60)) * (0.5 + 0.5 * jitter) $$;

-- "<type>: <message>" of the last entry of an errors JSON list (NULL if none or unreadable).
CREATE FUNCTION {schema}.fresh_error(errors bytea) RETURNS text LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
    last jsonb;
BEGIN
    last := convert_from(errors, 'UTF8')::jsonb -> -1;
    IF last IS NULL OR jsonb_typeof(last) <> 'object' THEN
        RETURN NULL;
    END IF;
    RETURN coalesce(last ->> 'type', 'Error') || ': ' || coalesce(last ->> 'message', '');
EXCEPTION WHEN others THEN
    RETURN NULL;
END
$$;

-- A scope's row once its sync job reached `status` (succeeded, failed, retrying, cancelled)
-- at `now`; `started` its run's start, `errors` its errors JSON.
CREATE FUNCTION {schema}.fresh_after(f {schema}.freshness, status text,
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
        f.job_id := NULL;
    ELSIF status IN ('failed', 'retrying') THEN
        f.failures := f.failures + 1;
        f.last_error := coalesce({schema}.fresh_error(errors), f.last_error);
        IF status = 'failed' THEN
            f.next_due := now + {schema}.fresh_backoff(f.failures, f.max_backoff, f.jitter);
            f.job_id := NULL;
        END IF;
    ELSIF status = 'cancelled' THEN
        f.last_error := 'cancelled';
        f.job_id := NULL;
    END IF;
    RETURN f;
END
$$;

-- One request on a scope (duly.freshness_state.decide), atomically: creates the row if
-- missing, locks it, decides, inserts the sync job (queued, woken) when one is due, stores the
-- policy. Returns the row afterwards and whether this call enqueued.
CREATE FUNCTION {schema}.fresh_request(
    p_name text, p_scope text, p_reason text, p_active boolean,
    p_ms double precision, p_fe double precision, p_mb double precision,
    p_off double precision, p_jitter double precision,
    p_id text, p_task text, p_queue text, p_max_attempts integer, p_key text,
    p_priority integer, p_full bytea, p_delta bytea, p_now double precision, p_channel text)
RETURNS TABLE (last_success double precision, last_attempt double precision,
               failures integer, last_error text, next_due double precision,
               requested_by text, job_id text, enqueued boolean)
LANGUAGE plpgsql
AS $$
#variable_conflict use_column
DECLARE
    f {schema}.freshness;
    want text := '';
    score double precision;
    boost integer := 100;
BEGIN
    INSERT INTO {schema}.freshness AS t (name, scope, max_staleness, full_every, max_backoff,
                                         offset_s, jitter, next_due, stale_at)
    VALUES (p_name, p_scope, p_ms, p_fe, p_mb, p_off, p_jitter,
            {schema}.fresh_next_baseline(p_now, p_off, p_fe), -1e18)
    ON CONFLICT ON CONSTRAINT freshness_pkey DO NOTHING;
    SELECT * INTO f FROM {schema}.freshness t
    WHERE t.name = p_name AND t.scope = p_scope FOR UPDATE;
    IF f.job_id IS NOT NULL THEN
        want := '';
    ELSIF p_reason = 'request' THEN
        want := 'full';
    ELSIF p_reason = 'baseline' THEN
        want := CASE WHEN f.next_due <= p_now THEN 'full' ELSE '' END;
    ELSIF f.failures > 0 AND f.next_due > p_now THEN
        want := '';
    ELSIF f.last_success IS NULL THEN
        want := 'full';
    ELSIF p_reason = 'touch' THEN
        want := 'delta';
    ELSE
        score := greatest(p_now - f.last_success, 0) / p_ms;
        want := CASE WHEN score >= 1 THEN 'full'
                     WHEN score >= 0.5 AND p_active THEN 'delta' ELSE '' END;
    END IF;
    IF p_reason = 'baseline' AND f.next_due <= p_now THEN
        f.next_due := {schema}.fresh_next_baseline(p_now, p_off, p_fe);
    END IF;
    IF want <> '' THEN
        IF p_reason <> 'request' AND f.last_success IS NOT NULL THEN
            boost := least(100, floor(10 * greatest(p_now - f.last_success, 0) / p_ms));
        END IF;
        INSERT INTO {schema}.jobs (id, task, queue, payload, status, max_attempts, key,
                                   priority, enqueued_at, scheduled_for, position)
        VALUES (p_id, p_task, p_queue, CASE WHEN want = 'full' THEN p_full ELSE p_delta END,
                'queued', p_max_attempts, p_key,
                greatest(-1000, least(1000, p_priority + boost)), p_now, p_now, p_now);
        INSERT INTO {schema}.queues (name) VALUES (p_queue) ON CONFLICT DO NOTHING;
        PERFORM pg_notify(p_channel, p_queue);
        f.job_id := p_id;
        f.requested_by := p_reason;
        f.jitter := p_jitter;
    END IF;
    UPDATE {schema}.freshness t
    SET max_staleness = p_ms, full_every = p_fe, max_backoff = p_mb, offset_s = p_off,
        jitter = f.jitter, next_due = f.next_due, requested_by = f.requested_by,
        job_id = f.job_id, stale_at = coalesce(f.last_success + p_ms, -1e18)
    WHERE t.name = p_name AND t.scope = p_scope;
    RETURN QUERY SELECT f.last_success, f.last_attempt, f.failures, f.last_error, f.next_due,
                        f.requested_by, f.job_id, want <> '';
END
$$;
