-- PostgreSQL named queries: taking ready jobs (claim, expiry at claim, gates, rate slots) and
-- renewing leases. Conventions: README.md beside this file.

-- name: claim_lock
-- First statement of a claim's transaction: the shared advisory lock of each queue of
-- %(queues)s (pause_lock takes it exclusive), held until commit. Advisory locks live in
-- memory: an empty poll writes nothing. The key: the OID of this schema's `queues` table in
-- the high 32 bits (distinct per schema, and never in the 0..2^32 range of the migration
-- lock, whose keys are CRC32s), the queue's hashtext in the low 32 bits (two queues sharing
-- one only wait for each other's pauses).
SELECT count(pg_advisory_xact_lock_shared(
           (to_regclass(quote_ident(%(schema)s) || '.queues')::oid::bigint << 32)
           | (hashtext(q.name)::bigint & 4294967295)))
FROM unnest(%(queues)b::text[]) AS q(name);

-- name: claim
-- Up to %(limit)s queued jobs, queue by queue in the order of %(queues)s (text[]), each queue
-- read through jobs_ready (parked = false) in (priority DESC, position, id) order. The nested
-- loop pulls rows lazily, so once %(limit)s rows are found no further row is locked.
--
-- Gated jobs: the first wanted job of each gate (its leader) asks the gate for a slot with an
-- upsert on `gates` (one per gate: ON CONFLICT cannot touch a row twice in a statement). The
-- upsert locks the gate row and reads its latest committed version even when its WHERE fails,
-- so the claims and releases of a gate are serialised on that row. With a slot, the leader is
-- taken; without, the gate's wanted jobs are parked (a release can only come after this
-- transaction commits, and will see them). The other jobs of a gate that granted a slot are
-- not touched (the next claim takes them or not). For plain jobs the gate CTEs see no rows;
-- parking is folded into the one UPDATE (a second UPDATE of `jobs` costs plain claims more).
--
-- Returns, for each job taken (run) or parked (not run): run, queue_pos, position, gate,
-- gate_limit, then {columns} with the new state.
WITH candidates AS (
    SELECT q.pos, c.id, c.lost, c.priority, c.position, c.gate, c.gate_limit
    FROM unnest(%(queues)b::text[]) WITH ORDINALITY AS q(name, pos)
    -- A paused queue gives nothing. No row lock: claim_lock, the statement before this one
    -- in the claim's transaction, orders it with a pause, and this statement's snapshot,
    -- taken after that lock, sees any pause committed before.
    LEFT JOIN {schema}.queues k ON k.name = q.name
    CROSS JOIN LATERAL (
        SELECT j.id, j.lost, j.priority, j.position, j.gate, j.gate_limit
        FROM {schema}.jobs j
        WHERE j.status = 'queued' AND j.queue = q.name AND NOT j.parked
          AND (j.expires_at IS NULL OR j.expires_at > %(now)s)
        ORDER BY j.priority DESC, j.position, j.id
        LIMIT %(limit)s
        FOR UPDATE SKIP LOCKED
    ) AS c
    WHERE k.paused_at IS NULL
    LIMIT %(limit)s
),
-- A job that already lost a worker (lost > 0) may be a poison pill: it is taken only alone, as
-- the first job of a claim (%(first)s: nothing was taken yet by this claim call), and nothing
-- after it is taken (the rest stay queued; their row locks end with this transaction).
ranked AS (
    SELECT pos, id, gate, gate_limit,
           row_number() OVER claim_order AS rn,
           count(*) FILTER (WHERE lost > 0) OVER (claim_order ROWS UNBOUNDED PRECEDING)
               AS tainted
    FROM candidates
    WINDOW claim_order AS (ORDER BY pos, priority DESC, position, id)
),
wanted AS (
    SELECT pos, id, gate, gate_limit, rn FROM ranked WHERE tainted = 0 OR (rn = 1 AND %(first)s)
),
leaders AS (
    SELECT DISTINCT ON (gate) pos, id, gate, gate_limit
    FROM wanted
    WHERE gate IS NOT NULL
    ORDER BY gate, rn
),
-- In gate order, so two claims lock gate rows in one order.
acquired AS (
    INSERT INTO {schema}.gates AS g (key, running)
    SELECT l.gate, 1 FROM leaders l ORDER BY l.gate
    ON CONFLICT (key) DO UPDATE SET running = g.running + 1
    WHERE g.running < (SELECT l.gate_limit FROM leaders l WHERE l.gate = excluded.key)
    RETURNING g.key
),
touched AS (
    SELECT pos, id, true AS run FROM wanted WHERE gate IS NULL
    UNION ALL
    SELECT l.pos, l.id, true FROM leaders l JOIN acquired a ON a.key = l.gate
    UNION ALL
    SELECT w.pos, w.id, false
    FROM wanted w
    WHERE w.gate IS NOT NULL AND w.gate NOT IN (SELECT key FROM acquired)
)
,
-- Expired jobs (0013): left out of the candidates above, so none starts; reported (run NULL)
-- for the claimer to end (expire_jobs).
expired AS (
    SELECT j.id
    FROM unnest(%(queues)b::text[]) AS q(name)
    CROSS JOIN LATERAL (
        SELECT j.id FROM {schema}.jobs j
        WHERE j.queue = q.name AND j.expires_at IS NOT NULL AND j.status = 'queued'
          AND j.expires_at <= %(now)s
        ORDER BY j.expires_at
        LIMIT 100
    ) AS j
    WHERE NOT EXISTS (  -- a paused queue is left alone, its expired jobs included
        SELECT 1 FROM {schema}.queues k WHERE k.name = q.name AND k.paused_at IS NOT NULL)
),
started AS (
UPDATE {schema}.jobs j
SET status = CASE WHEN t.run THEN 'running' ELSE j.status END,
    attempts = CASE WHEN t.run THEN j.attempts + 1 ELSE j.attempts END,
    started_at = CASE WHEN t.run THEN %(now)s ELSE j.started_at END,
    worker = CASE WHEN t.run THEN %(worker)s ELSE j.worker END,
    lease_until = CASE WHEN t.run THEN %(lease_until)s ELSE j.lease_until END,
    finished_at = CASE WHEN t.run THEN NULL ELSE j.finished_at END,
    -- A unique_until = 'start' hold ends when its job first starts.
    unique_key = CASE WHEN t.run AND j.unique_until = 'start' THEN NULL ELSE j.unique_key END,
    -- The expiry is about a job that never started: once started, a way back to queued (a
    -- recovery, a release, a retry) must not end it as "never run".
    expires_at = CASE WHEN t.run THEN NULL ELSE j.expires_at END,
    parked = NOT t.run
FROM touched t
WHERE j.id = t.id
RETURNING t.run, t.pos, j.position, j.gate, j.gate_limit, {columns}
)
SELECT * FROM started
UNION ALL
SELECT NULL::boolean, NULL::bigint, j.position, j.gate, j.gate_limit, {columns}
FROM {schema}.jobs j JOIN expired e ON e.id = j.id;

-- name: expire_jobs
-- The end of the jobs a claim found expired, %(ids)s (text[]), in one statement (rows locked
-- first, in id order as cancel_many does; one still queued and expired, else left alone):
-- cancelled as cancel does a waiting job, with a JobExpired error appended to its errors (JSON
-- list). Returns per job: gate, was_waiting (queued and not parked: its turn passes on) and the
-- record.
WITH cur AS (
    SELECT j.id, j.parked
    FROM {schema}.jobs j
    WHERE j.id = ANY(%(ids)s::text[]) AND j.status = 'queued' AND j.expires_at <= %(now)s
    ORDER BY j.id
    FOR UPDATE
)
UPDATE {schema}.jobs j
SET status = 'cancelled', finished_at = %(now)s, lease_until = NULL,
    expire_at = %(expire_at)s, parked = false,
    errors = convert_to((
        CASE WHEN j.errors IS NOT NULL AND jsonb_typeof(convert_from(j.errors, 'UTF8')::jsonb)
                                            = 'array'
             THEN convert_from(j.errors, 'UTF8')::jsonb ELSE '[]'::jsonb END
        || jsonb_build_array(jsonb_build_object(
               'type', 'JobExpired', 'message', %(message)s::text, 'traceback', '',
               'at', %(now)s::double precision, 'attempt', j.attempts)))::text, 'UTF8')
FROM cur
WHERE j.id = cur.id
RETURNING j.gate, NOT cur.parked, {columns};

-- name: gate_park
-- After a claim parked jobs of full gates (%(gates)s, each once, with the limit its leader
-- saw, %(limits)s): park the other queued jobs of those gates too, at once, so the next claim
-- reaches the jobs behind a backlog instead of parking it a batch at a time. Each gate row is
-- locked first (a no-op upsert returns its latest version) and re-checked: a gate freed
-- meanwhile is left alone. Rows other claims hold are theirs to park or take.
WITH asked AS (
    SELECT * FROM unnest(%(gates)s::text[], %(limits)s::integer[]) AS a(key, lim)
),
locked AS (
    INSERT INTO {schema}.gates AS g (key, running)
    SELECT key, 0 FROM asked ORDER BY key
    ON CONFLICT (key) DO UPDATE SET running = g.running
    RETURNING g.key, g.running
),
full_gate AS (
    SELECT l.key FROM locked l JOIN asked a ON a.key = l.key WHERE l.running >= a.lim
)
UPDATE {schema}.jobs j
SET parked = true
FROM full_gate f
CROSS JOIN LATERAL (
    SELECT x.id
    FROM {schema}.jobs x
    WHERE x.gate = f.key AND x.status = 'queued' AND NOT x.parked
    FOR UPDATE SKIP LOCKED
) AS p
WHERE j.id = p.id;

-- name: heartbeat
-- Extends the leases of the jobs among %(ids)s still running under %(worker)s.
-- Returns: extended (text[]), those of them whose cancel was not requested (expire_at is set
-- on a running job only by a cancel request): the worker must stop the others.
WITH seen AS (
    UPDATE {schema}.workers SET last_seen = %(now)s WHERE id = %(worker)s
),
extended AS (
    UPDATE {schema}.jobs j
    SET lease_until = %(lease_until)s
    WHERE j.id = ANY(%(ids)b::text[]) AND j.status = 'running' AND j.worker = %(worker)s
    RETURNING j.id, j.expire_at
)
SELECT ARRAY(SELECT id FROM extended WHERE expire_at IS NULL) AS extended;

-- name: rate_lock
-- First statement of reserve_rate: one row per key of the batch, created (tat = now, no
-- not_before: equivalent to no state) or locked, in key order. ON CONFLICT DO UPDATE locks the
-- row and returns its latest committed version, so concurrent reservations of a key queue here.
-- Returns: key, tat, not_before.
INSERT INTO {schema}.rate_limits AS r (key, tat, not_before)
SELECT DISTINCT k, %(now)s::double precision, 0.0 FROM unnest(%(keys)s::text[]) AS k ORDER BY 1
ON CONFLICT (key) DO UPDATE SET tat = r.tat
RETURNING r.key, r.tat, r.not_before;

-- name: rate_store
-- Second statement of reserve_rate: each key's state after the batch's slots.
UPDATE {schema}.rate_limits r
SET tat = n.tat, not_before = n.not_before
FROM unnest(%(keys)s::text[], %(tats)s::double precision[], %(not_before)s::double precision[])
     AS n(key, tat, not_before)
WHERE r.key = n.key;
