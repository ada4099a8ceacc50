"""Claiming on PostgreSQL with millions of finished rows present (issue 4, "bounded growth").

    python -m bench.pg_finished_rows [--finished 2000000] [--jobs 20000] [--rounds 3]

In a fresh schema ``bench_fr_<hex>`` of ``--url`` (default ``BENCH_PG_URL`` or
``postgresql://postgres@127.0.0.1:5432/test``), dropped at the end:

1. **without finished rows**: ``--rounds`` times, enqueue ``--jobs`` jobs on queue ``default``
   with ``PostgresBackend.enqueue`` (the first 5,000 one job per call, like ``task.enqueue``,
   timed as "enqueue jobs/s"; the rest in batches of 1,000, timed as bulk), then claim and
   finish them in batches of 100 with ``PostgresBackend.claim``/``finish`` under one worker id,
   as the worker does (claim, then report ``succeeded`` outcomes with the default retention);
2. ``--finished`` finished rows are inserted with one ``INSERT ... SELECT ... FROM
   generate_series`` straight into the schema's ``jobs`` table (90 % succeeded, 10 % failed,
   four queues including ``default``, four tasks, a key on 20 %, finished over the last 23 h,
   ``expire_at`` in the future except ``--purge`` rows spread through the table, already
   expired), then ``VACUUM (ANALYZE)`` and ``CHECKPOINT`` (so the fill's writes are not
   measured);
3. **with finished rows**: the same rounds as 1, interleaved round by round with the same
   rounds in a control schema ``bench_fr_<hex>_control`` that has no finished rows (the
   machine's other load then hits both alike);
4. ``EXPLAIN (ANALYZE, BUFFERS)`` of the claim query (custom plan, and the generic plan that a
   prepared statement switches to after five runs; psycopg prepares a query on its fifth
   execution), inside a rolled-back transaction, with ``--jobs`` jobs queued and the
   statistics of the phase's start (no new ANALYZE), in both schemas;
5. one ``PostgresBackend.purge(now, --purge)`` batch: deletes the expired rows among the
   millions (and a second call that finds nothing).

Before each phase the ``jobs`` table is ``VACUUM (ANALYZE)``-ed (autovacuum may be off on the
bench server). Rates are medians over the rounds; claim latencies (one ``claim`` call, batch of
100) are pooled over all rounds of a phase. Prints a table and writes
``bench/results/pg_finished_rows.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import secrets
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from duly._ids import new_id
from duly._records import NewJob, Outcome
from duly.backends.postgres import PostgresBackend

DEFAULT_URL = os.environ.get("BENCH_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
RESULTS = Path(__file__).resolve().parent / "results" / "pg_finished_rows.json"
QUEUE = "default"
BATCH = 100
SINGLE_ENQUEUES = 5000  # enqueue jobs/s: one job per call, as bench/README.md's column
WARM_UP = 1000  # jobs enqueued and drained once, untimed, before phase 1
BULK = 1000  # the rest of a round's jobs are enqueued in batches of this size
LEASE = 30.0
RETENTION = 86_400.0  # duly's default retention of succeeded jobs (24 h)
WORKER = "bench-fr-worker"

# The finished rows: every column of `jobs`, computed from i = 1..%(n)s. Ids sort before any
# id duly makes today (ULIDs of 2023 start with 01H), so new jobs go to the right of the pkey.
FILL_SQL = """
INSERT INTO {jobs} (
    id, task, queue, payload, status, attempts, max_attempts, key, priority,
    enqueued_at, scheduled_for, started_at, finished_at, result, errors, worker,
    lease_until, lost, expire_at, position)
SELECT '01H' || lpad(i::text, 23, '0'),
       (ARRAY['app.send_email', 'app.resize_image', 'app.build_report', 'app.sync'])
           [1 + mod(i, 4)],
       (ARRAY['default', 'emails', 'reports', 'low'])[1 + mod(i / 3, 4)],
       convert_to('[[' || i || ', "user-' || (mod(i, 9973)) || '"], {{}}]', 'UTF8'),
       CASE WHEN failed THEN 'failed' ELSE 'succeeded' END,
       CASE WHEN failed THEN 3 ELSE 1 END,
       3,
       CASE WHEN mod(i, 5) = 0 THEN 'order-' || i END,
       0,
       t, t, t + 0.002, t + 0.010,
       CASE WHEN failed THEN NULL ELSE convert_to('{{"ok": true}}', 'UTF8') END,
       CASE WHEN failed THEN convert_to(
           '[{{"type": "ValueError", "message": "bad input ' || i || '", '
           || '"traceback": "Traceback (most recent call last):\\n  File \\"app.py\\", '
           || 'line 42, in handler\\nValueError: bad input", "at": ' || t || ', '
           || '"attempt": 3}}]', 'UTF8') END,
       'bench-old-worker-' || (mod(i, 8)),
       NULL,
       0,
       CASE WHEN %(stride)s > 0 AND mod(i, %(stride)s) = 7 THEN %(now)s - 3600 + i * 1e-6
            WHEN failed THEN t + 0.010 + 7 * 86400
            ELSE t + 0.010 + 86400 END,
       t
FROM generate_series(1, %(n)s) AS g(i),
     LATERAL (SELECT mod(i, 10) = 3 AS failed,
                     %(now)s - 82800 + i * (82740.0 / %(n)s) AS t) AS v
"""


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def _load() -> float:
    return round(os.getloadavg()[0], 2)


async def _sql(url: str, statement: Any, params: Any = None) -> list[tuple[Any, ...]]:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cur = await conn.execute(statement, params)
        return await cur.fetchall() if cur.description else []


async def _vacuum(url: str, schema: str) -> float:
    started = time.perf_counter()
    await _sql(url, sql.SQL("VACUUM (ANALYZE) {}.jobs").format(sql.Identifier(schema)))
    return time.perf_counter() - started


def _new_jobs(n: int) -> list[NewJob]:
    jobs = []
    for i in range(n):
        now = time.time()
        jobs.append(
            NewJob(new_id(), "bench.noop", QUEUE, f"[[{i}], {{}}]".encode(), 3, None, 0, now, now)
        )
    return jobs


async def _round(backend: PostgresBackend, n: int, claim_ms: list[float]) -> dict[str, Any]:
    """Enqueue n jobs (the first SINGLE_ENQUEUES one per call, the rest in batches of BULK),
    then claim+finish them in batches of BATCH; return the rates."""
    jobs = _new_jobs(n)
    single = min(n, SINGLE_ENQUEUES)
    started = time.perf_counter()
    for job in jobs[:single]:
        await backend.enqueue([job])
    enqueue_s = time.perf_counter() - started
    started = time.perf_counter()
    for i in range(single, n, BULK):
        await backend.enqueue(jobs[i : i + BULK])
    bulk_s = time.perf_counter() - started

    done = 0
    finish_ms: list[float] = []
    started = time.perf_counter()
    while True:
        now = time.time()
        t0 = time.perf_counter()
        records = await backend.claim(WORKER, [QUEUE], BATCH, now, now + LEASE)
        elapsed = time.perf_counter() - t0
        if not records:
            break
        claim_ms.append(elapsed * 1000)
        now = time.time()
        outcomes = [
            Outcome(r.id, "succeeded", result=b"null", expire_at=now + RETENTION) for r in records
        ]
        t0 = time.perf_counter()
        applied = await backend.finish(WORKER, outcomes, now)
        finish_ms.append((time.perf_counter() - t0) * 1000)
        done += sum(applied)
    drain_s = time.perf_counter() - started
    if done != n:
        raise RuntimeError(f"claimed and finished {done} jobs, expected {n}")
    return {
        "enqueue_jobs_s": single / enqueue_s,
        "bulk_enqueue_jobs_s": (n - single) / bulk_s if n > single else None,
        "claim_finish_jobs_s": n / drain_s,
        "finish_ms_p50": _pct(finish_ms, 0.50),
        "finish_ms_p99": _pct(finish_ms, 0.99),
        "enqueue_s": enqueue_s,
        "claim_finish_s": drain_s,
    }


async def _phase(
    url: str, targets: list[tuple[str, PostgresBackend, int]], jobs: int, rounds: int
) -> dict[str, dict[str, Any]]:
    """``rounds`` rounds on each (label, backend, finished rows) target, interleaved (the order
    flips every round), so that other load on the machine hits every target alike."""
    out: dict[str, dict[str, Any]] = {}
    claim_ms: dict[str, list[float]] = {}
    for label, backend, finished in targets:
        out[label] = {
            "schema": backend.schema,
            "finished_rows": finished,
            "vacuum_analyze_s": round(await _vacuum(url, backend.schema), 2),
            "runs": [],
            "loadavg_1m": [_load()],
        }
        claim_ms[label] = []
    for r in range(rounds):
        for label, backend, _ in targets if r % 2 == 0 else targets[::-1]:
            res = await _round(backend, jobs, claim_ms[label])
            res["loadavg_1m"] = _load()
            out[label]["runs"].append(res)
            print(
                f"  [{label}] round {r + 1}/{rounds}: enqueue {res['enqueue_jobs_s']:,.0f}/s, "
                f"claim+finish {res['claim_finish_jobs_s']:,.0f}/s, load {_load()}",
                flush=True,
            )
    for label, res in out.items():
        runs, ms = res["runs"], claim_ms[label]
        res["loadavg_1m"].append(_load())
        res.update(
            claim_finish_jobs_s=statistics.median(r["claim_finish_jobs_s"] for r in runs),
            enqueue_jobs_s=statistics.median(r["enqueue_jobs_s"] for r in runs),
            bulk_enqueue_jobs_s=statistics.median(r["bulk_enqueue_jobs_s"] or 0.0 for r in runs),
            claim_ms_p50=_pct(ms, 0.50),
            claim_ms_p99=_pct(ms, 0.99),
            claim_ms_max=max(ms),
            claims=len(ms),
        )
    return out


async def _fill(url: str, schema: str, n: int, purge: int) -> dict[str, Any]:
    jobs = sql.SQL("{}.jobs").format(sql.Identifier(schema))
    stride = n // purge if purge else 0
    started = time.perf_counter()
    await _sql(
        url,
        sql.SQL(FILL_SQL).format(jobs=jobs),
        {"n": n, "now": time.time(), "stride": stride},
    )
    insert_s = time.perf_counter() - started
    await _sql(
        url,
        sql.SQL(
            "INSERT INTO {}.queues (name) "
            "SELECT unnest(ARRAY['default', 'emails', 'reports', 'low']) ON CONFLICT DO NOTHING"
        ).format(sql.Identifier(schema)),
    )
    rows = await _sql(
        url,
        "SELECT c.relname, pg_relation_size(c.oid) FROM pg_class c "
        "JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s AND c.relname LIKE 'jobs%%' ORDER BY 1",
        [schema],
    )
    counts = await _sql(
        url,
        sql.SQL("SELECT count(*) FILTER (WHERE expire_at <= %s), count(*) FROM {}.jobs").format(
            sql.Identifier(schema)
        ),
        [time.time()],
    )
    return {
        "insert_s": round(insert_s, 2),
        "expired_rows": counts[0][0],
        "rows_total": counts[0][1],
        "relation_mb": {name: round(size / 2**20, 1) for name, size in rows},
    }


def _positional(query: bytes) -> tuple[str, list[str]]:
    """The bound claim query with ``%(name)s`` turned into ``$n`` (for PREPARE)."""
    names: list[str] = []

    def sub(m: re.Match[str]) -> str:
        if m.group(1) not in names:
            names.append(m.group(1))
        return f"${names.index(m.group(1)) + 1}"

    text = re.sub(r"%\((\w+)\)[sb]", sub, query.decode()).replace("%%", "%")
    return text, names


async def _explain(backend: PostgresBackend, url: str, queued: int) -> dict[str, str]:
    """EXPLAIN (ANALYZE, BUFFERS) of one claim of 100, custom and generic plan, rolled back."""
    # No ANALYZE here: the statistics stay those of the phase's start (queue empty), as in a
    # deployment where autovacuum analyzed the table while the queue was drained.
    for i in range(0, queued, BULK):
        await backend.enqueue(_new_jobs(min(BULK, queued - i)))
    query: bytes = backend._db.q["claim"]
    now = time.time()
    params: dict[str, Any] = {
        "queues": [QUEUE],
        "limit": BATCH,
        "first": True,
        "now": now,
        "worker": WORKER,
        "lease_until": now + LEASE,
    }
    plans = {}
    async with await psycopg.AsyncConnection.connect(url) as conn:
        # Warm-up, as in a running worker (the measured claim should not read from disk).
        cur = await conn.execute(b"EXPLAIN (ANALYZE, BUFFERS) " + query, params)
        await conn.rollback()
        cur = await conn.execute(b"EXPLAIN (ANALYZE, BUFFERS) " + query, params)
        plans["custom"] = "\n".join(r[0] for r in await cur.fetchall())
        await conn.rollback()

        text, names = _positional(query)
        await conn.execute("SET plan_cache_mode = force_generic_plan")
        await conn.execute(sql.SQL("PREPARE bench_claim AS {}").format(sql.SQL(text)))
        args = sql.SQL(", ").join(sql.Literal(params[n]) for n in names)
        explain = sql.SQL("EXPLAIN (ANALYZE, BUFFERS) EXECUTE bench_claim ({})").format(args)
        cur = await conn.execute(explain)
        plans["generic"] = "\n".join(r[0] for r in await cur.fetchall())
        await conn.rollback()
    return plans


def _summary(plan: str) -> str:
    """One line: indexes read, buffers of the jobs_ready scan and of the whole statement."""
    indexes = sorted(set(re.findall(r"Index (?:Only )?Scan(?: Backward)? using (\w+)", plan)))
    seq = re.findall(r"Seq Scan on (\S+)", plan)
    total = re.search(r"Buffers: shared ([^\n]+)", plan)
    ready = re.search(
        r"Index Scan using jobs_(?:ready|status) on jobs j(?:_\d+)?\b.*?Buffers: shared ([^\n]+)",
        plan,
        re.S,
    )
    exec_ms = re.search(r"Execution Time: ([\d.]+) ms", plan)
    return (
        f"indexes {', '.join(indexes) or '-'}; seq scans {', '.join(seq) or 'none'}; "
        f"candidate scan buffers: {ready.group(1) if ready else '?'}; "
        f"statement buffers: {total.group(1) if total else '?'}; "
        f"execution {exec_ms.group(1) if exec_ms else '?'} ms"
    )


async def _purge(backend: PostgresBackend, limit: int) -> dict[str, Any]:
    started = time.perf_counter()
    deleted = await backend.purge(time.time(), limit)
    first_ms = (time.perf_counter() - started) * 1000
    started = time.perf_counter()
    again = await backend.purge(time.time(), limit)
    second_ms = (time.perf_counter() - started) * 1000
    return {
        "limit": limit,
        "deleted": deleted,
        "ms": round(first_ms, 1),
        "second_call_deleted": again,
        "second_call_ms": round(second_ms, 1),
    }


def _table(out: dict[str, Any]) -> str:
    rows = [
        ("0 (phase 1, before the fill)", out["without"]),
        ("0 (control schema, interleaved)", out["control"]),
        (f"{out['with']['finished_rows']:,}", out["with"]),
    ]
    lines = [
        "| finished rows present | claim+finish jobs/s | enqueue jobs/s | claim p50 ms "
        "| claim p99 ms | claim max ms |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for label, res in rows:
        lines.append(
            f"| {label} | {res['claim_finish_jobs_s']:,.0f} "
            f"| {res['enqueue_jobs_s']:,.0f} | {res['claim_ms_p50']:.2f} "
            f"| {res['claim_ms_p99']:.2f} | {res['claim_ms_max']:.2f} |"
        )
    for label, base in (("phase 1", out["without"]), ("control", out["control"])):
        r = _ratios(out["with"], base)
        lines.append(
            f"| ratio with/without ({label}) | {r['claim_finish_jobs_s']:.2f}x "
            f"| {r['enqueue_jobs_s']:.2f}x | {r['claim_ms_p50']:.2f}x "
            f"| {r['claim_ms_p99']:.2f}x | {r['claim_ms_max']:.2f}x |"
        )
    return "\n".join(lines)


def _ratios(with_: dict[str, Any], base: dict[str, Any]) -> dict[str, float]:
    keys = ("claim_finish_jobs_s", "enqueue_jobs_s", "claim_ms_p50", "claim_ms_p99", "claim_ms_max")
    return {key: round(with_[key] / base[key], 3) for key in keys}


async def run(args: argparse.Namespace) -> dict[str, Any]:
    schema = f"bench_fr_{secrets.token_hex(4)}"
    backend = PostgresBackend(args.url, schema)
    control = PostgresBackend(args.url, f"{schema}_control")
    n = args.finished
    out: dict[str, Any] = {
        "schema": schema,
        "control_schema": control.schema,
        "jobs_per_round": args.jobs,
        "rounds": args.rounds,
        "batch": BATCH,
        "cpus": os.cpu_count(),
        "loadavg_1m_start": _load(),
        "python": sys.version.split()[0],
    }
    print(f"schemas {schema}, {control.schema}; load {_load()}", flush=True)
    try:
        await backend.open()
        await control.open()
        version = await _sql(args.url, "SHOW server_version")
        autovacuum = await _sql(args.url, "SHOW autovacuum")
        out["server_version"], out["autovacuum"] = version[0][0], autovacuum[0][0]
        for b in (backend, control):  # connections, prepared statements, caches
            await _round(b, WARM_UP, [])
        print("phase 1: no finished rows", flush=True)
        phase = await _phase(args.url, [("0", backend, 0)], args.jobs, args.rounds)
        out["without"] = phase["0"]
        print(f"inserting {n:,} finished rows...", flush=True)
        out["fill"] = await _fill(args.url, schema, n, args.purge)
        out["fill"]["vacuum_analyze_s"] = round(await _vacuum(args.url, schema), 2)
        # The fill dirtied ~1 GB and wrote as much WAL: checkpoint now, or the checkpoint it
        # triggers (and its full-page writes) would run during phase 2 and be measured.
        started = time.perf_counter()
        await _sql(args.url, "CHECKPOINT")
        out["fill"]["checkpoint_s"] = round(time.perf_counter() - started, 2)
        print(f"  {out['fill']}", flush=True)
        print(f"phase 2: {n:,} finished rows, interleaved with a control schema", flush=True)
        phase = await _phase(
            args.url, [(f"{n:,}", backend, n), ("0 ctl", control, 0)], args.jobs, args.rounds
        )
        out["with"], out["control"] = phase[f"{n:,}"], phase["0 ctl"]
        out["explain"] = await _explain(backend, args.url, args.jobs)
        out["explain_control"] = await _explain(control, args.url, args.jobs)
        out["purge"] = await _purge(backend, args.purge)
    finally:
        for b in (backend, control):
            await b.drop()
            await b.close()
    out["loadavg_1m_end"] = _load()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", default=DEFAULT_URL)
    parser.add_argument("--finished", type=int, default=2_000_000)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--purge", type=int, default=1000, help="expired rows; one purge batch")
    args = parser.parse_args(argv)

    out = asyncio.run(run(args))
    out["ratio_with_without"] = _ratios(out["with"], out["without"])
    out["ratio_with_control"] = _ratios(out["with"], out["control"])
    print()
    print(_table(out))
    print()
    p = out["purge"]
    print(
        f"purge: {p['deleted']} of {out['fill']['expired_rows']} expired rows among "
        f"{out['fill']['rows_total']:,} deleted in {p['ms']} ms (limit {p['limit']}); "
        f"a second call found {p['second_call_deleted']} in {p['second_call_ms']} ms"
    )
    print(f"relation sizes (MB) after the fill: {out['fill']['relation_mb']}")
    for kind, plan in out["explain_control"].items():
        print(f"claim plan, control schema ({kind}): {_summary(plan)}")
    for kind, plan in out["explain"].items():
        print(f"\nclaim plan, {out['with']['finished_rows']:,} rows ({kind}): {_summary(plan)}")
        print(plan)
    print(
        f"\nload average (1 min, {out['cpus']} cores): start {out['loadavg_1m_start']}, "
        f"phase 1 {out['without']['loadavg_1m']}, phase 2 {out['with']['loadavg_1m']}, "
        f"end {out['loadavg_1m_end']}"
    )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
