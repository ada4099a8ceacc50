"""Promotion cost with 1,000,000 pending delayed jobs (issue 6, item 3: "cost nothing until due").

    python -m bench.promote_scale [--pending 1000000] [--due 1000] [--rounds 15]
                                  [--backends sqlite,redis,postgres] [--budget 360]
                                  [--entries jobs|watches]

``--entries watches`` makes every pending entry a watch as ``@app.watch`` stores it (a
scheduled job with a unique key and a key-index entry), to report bytes per pending watch.

For each backend, in a namespace of its own that is removed at the end (SQLite: a temp file;
Redis: namespace ``bench_ps_<hex>`` on ``--redis`` (127.0.0.1:6379 db 0), deleted with
``backend.drop()``; PostgreSQL: schema ``bench_ps_<hex>`` on ``--pg``, dropped):

1. **1k pending**: 1,000 jobs are enqueued far in the future (uniformly over days 1..31 after
   the start). Then ``--rounds`` times (after one untimed warm-up round): "now" advances by
   10 s, ``--due`` jobs are enqueued due within the next second, "now" is set past them and
   ``backend.promote_due(now, 1000)`` is timed (repeated until all ``--due`` moved, if more
   than 1,000). The median is reported.
2. The backend's footprint is measured, then jobs not yet due (same far-future spread) are
   enqueued with ``backend.enqueue`` in batches of 5,000 until ``--pending`` are pending, or
   until the backend's time budget (``--budget`` seconds per backend, loading stops early
   enough to leave time for the rest) runs out: then the table says how many were reached.
   The footprint is measured again.
3. **1M pending**: the same rounds as 1.

A second namespace of the same backend, the **control**, is made alongside and kept at 1,000
pending; every round of 1 and 3 also times one promotion on it, alternating with the subject
(order flipped every round). "ratio" is the issue's figure (step 3 / step 1); "ratio vs
control" divides step 3 by the control timed in the same minutes, which takes out the drift of
a shared machine's load between step 1 and step 3.

Time passes only through the ``now`` values handed to the backend (the protocol takes ``now``
from the caller): nothing sleeps. Promoted jobs stay queued (they are in the ready index, not
the due index). Bytes per pending entry = footprint delta / jobs added in step 2:

- SQLite: file size after ``PRAGMA wal_checkpoint(TRUNCATE)``;
- PostgreSQL: ``pg_total_relation_size`` of the schema's ``jobs`` table (heap, TOAST and
  every index);
- Redis: the namespace's ``MEMORY USAGE`` (``SAMPLES 0``): every non-job key summed exactly
  (``due``, ``all``, ...), plus the job hashes as their number times the mean of 2,000 random
  pending job hashes; ``INFO memory`` ``used_memory`` delta is recorded too (noisier: db 0 is
  shared with whatever else runs).

Also recorded: the query plan of the promotion (SQLite ``EXPLAIN QUERY PLAN``; PostgreSQL
``EXPLAIN (ANALYZE, BUFFERS)`` inside a rolled-back transaction, with a due batch present).
Prints a table and writes ``bench/results/promote_scale.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import random
import secrets
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from duly._ids import new_id
from duly._records import NewJob

RESULTS = Path(__file__).resolve().parent / "results" / "promote_scale.json"
DEFAULT_REDIS = "redis://127.0.0.1:6379/0"
DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/test"
PAYLOAD = b'{"args":[],"kwargs":{}}'
TASK = "bench.promote_scale.noop"
QUEUE = "default"
LOAD_BATCH = 5000
BASELINE_PENDING = 1000  # the "1k pending" state
LIMIT = 1000  # promote_due(now, LIMIT)
STEP = 10.0  # seconds "now" advances per round
DAY = 86_400.0
RESERVE = 75.0  # seconds of a backend's budget kept for what follows the load
REDIS_SAMPLE = 2000
DASH = "\u2013"


#: ``--entries watches``: pending entries are watches (``@app.watch`` jobs: a unique key and a
#: key index entry per (watch, arguments)), not plain delayed jobs.
ENTRIES = {"kind": "jobs"}
_watch_numbers = itertools.count()


def _job(enqueued_at: float, scheduled_for: float) -> NewJob:
    if ENTRIES["kind"] == "watches":
        n = next(_watch_numbers)
        identity = f'bench.order_unshipped:{{"order_id":{n}}}'
        return NewJob(
            id=new_id(),
            task="bench.order_unshipped",
            queue=QUEUE,
            payload=b'{"args":[],"kwargs":{"order_id":%d}}' % n,
            max_attempts=4,
            key=identity,
            priority=0,
            enqueued_at=enqueued_at,
            scheduled_for=scheduled_for,
            unique_key=identity,
        )
    return NewJob(
        id=new_id(),
        task=TASK,
        queue=QUEUE,
        payload=PAYLOAD,
        max_attempts=3,
        key=None,
        priority=0,
        enqueued_at=enqueued_at,
        scheduled_for=scheduled_for,
    )


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _load() -> float:
    return round(os.getloadavg()[0], 2)


class Target:
    """One backend under test: how to make it, measure its footprint, explain, clean up."""

    name = ""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.tag = f"bench_ps_{secrets.token_hex(4)}"
        self.backend: Any = None

    def describe(self) -> str:
        return self.tag

    async def footprint(self) -> dict[str, float]:
        raise NotImplementedError

    async def explain(self, now: float) -> list[str]:
        return []

    async def cleanup(self) -> None:
        if self.backend is not None:
            with contextlib.suppress(Exception):
                await self.backend.drop()
            with contextlib.suppress(Exception):
                await self.backend.close()


class SqliteTarget(Target):
    name = "sqlite"

    def __init__(self, args: argparse.Namespace) -> None:
        super().__init__(args)
        from duly.backends.sqlite import SqliteBackend

        self.dir = tempfile.mkdtemp(prefix="bench_ps_")
        self.path = os.path.join(self.dir, "promote.db")
        self.backend = SqliteBackend(f"sqlite:///{self.path}")

    def describe(self) -> str:
        return self.path

    def _checkpointed_size(self) -> int:
        conn = sqlite3.connect(self.path)
        try:
            busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            if busy:
                raise RuntimeError("checkpoint blocked")
        finally:
            conn.close()
        wal = self.path + "-wal"
        return os.path.getsize(self.path) + (os.path.getsize(wal) if os.path.exists(wal) else 0)

    async def footprint(self) -> dict[str, float]:
        return {"bytes": float(await asyncio.to_thread(self._checkpointed_size))}

    async def explain(self, now: float) -> list[str]:
        from duly.backends.sqlite._connection import QUERIES as _QUERIES

        def plan() -> list[str]:
            conn = sqlite3.connect(self.path)
            try:
                rows = []
                for name in ("promote_due", "next_due"):
                    for row in conn.execute(
                        "EXPLAIN QUERY PLAN " + _QUERIES[name], {"now": now, "limit": LIMIT}
                    ):
                        rows.append(f"{name}: {row[-1]}")
                return rows
            finally:
                conn.close()

        return await asyncio.to_thread(plan)

    async def cleanup(self) -> None:
        with contextlib.suppress(Exception):
            await self.backend.close()
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.remove(self.path + suffix)
        with contextlib.suppress(OSError):
            os.rmdir(self.dir)


class RedisTarget(Target):
    name = "redis"

    def __init__(self, args: argparse.Namespace) -> None:
        super().__init__(args)
        from duly.backends.redis import RedisBackend

        self.backend = RedisBackend(args.redis, namespace=self.tag)

    def describe(self) -> str:
        return f"{self.args.redis} namespace {self.tag}"

    async def footprint(self) -> dict[str, float]:
        client = self.backend._conn.client
        keys = self.backend.keys
        job_prefix = keys.job("").encode()
        other = 0
        jobs = 0
        async for key in client.scan_iter(match=keys.pattern, count=5000):
            if key.startswith(job_prefix):
                jobs += 1
            else:
                other += int(await client.memory_usage(key, samples=0) or 0)
        sample = await client.zrandmember(keys.due, REDIS_SAMPLE) or []
        sizes = []
        async with client.pipeline(transaction=False) as pipe:
            for job_id in sample:
                pipe.memory_usage(keys.job(_text(job_id)), samples=0)
            sizes = [int(s or 0) for s in await pipe.execute()]
        mean_job = statistics.fmean(sizes) if sizes else 0.0
        info = await client.info("memory")
        return {
            "bytes": other + jobs * mean_job,
            "job_keys": float(jobs),
            "mean_job_hash": mean_job,
            "other_keys_bytes": float(other),
            "used_memory": float(info["used_memory"]),
        }


class PostgresTarget(Target):
    name = "postgres"

    def __init__(self, args: argparse.Namespace) -> None:
        super().__init__(args)
        from duly.backends.postgres import PostgresBackend

        self.backend = PostgresBackend(args.pg, schema=self.tag)

    def describe(self) -> str:
        return f"{self.args.pg} schema {self.tag}"

    async def _query(self, text: str, params: Any = None) -> list[tuple[Any, ...]]:
        import psycopg

        async with await psycopg.AsyncConnection.connect(self.args.pg, autocommit=True) as conn:
            cur = await conn.execute(text, params)
            return await cur.fetchall() if cur.description else []

    async def footprint(self) -> dict[str, float]:
        rows = await self._query(
            "SELECT pg_total_relation_size(%s), pg_relation_size(%s),"
            " pg_indexes_size(%s), (SELECT n_live_tup FROM pg_stat_user_tables"
            "  WHERE schemaname = %s AND relname = 'jobs')",
            [f'"{self.tag}".jobs'] * 3 + [self.tag],
        )
        total, heap, indexes, live = rows[0]
        return {
            "bytes": float(total),
            "heap": float(heap),
            "indexes": float(indexes),
            "n_live_tup": float(live or 0),
        }

    async def explain(self, now: float) -> list[str]:
        import psycopg

        query = self.backend._db.q["promote_due"]
        params = {"now": now, "limit": LIMIT, "channel": self.backend.channel}
        async with await psycopg.AsyncConnection.connect(self.args.pg) as conn:
            try:
                cur = await conn.execute(b"EXPLAIN (ANALYZE, BUFFERS) " + query, params)
                return [row[0] for row in await cur.fetchall()]
            finally:
                await conn.rollback()


TARGETS: dict[str, type[Target]] = {
    "sqlite": SqliteTarget,
    "redis": RedisTarget,
    "postgres": PostgresTarget,
}


class Clock:
    """The caller's clock: starts at the real time, moves only when told."""

    def __init__(self) -> None:
        self.start = time.time()
        self.now = self.start

    def far_future(self, rng: random.Random) -> float:
        return self.start + DAY + rng.random() * 30 * DAY


async def _round(
    target: Target,
    clock: Clock,
    due: int,
    before_timed: Callable[[float], Awaitable[None]] | None,
) -> tuple[float, int]:
    """Enqueue ``due`` jobs due within a second, move "now" past them, time their promotion."""
    backend = target.backend
    clock.now += STEP
    batch_at = clock.now
    jobs = [_job(batch_at, batch_at + 0.5 + i * (0.4 / max(due, 1))) for i in range(due)]
    for start in range(0, len(jobs), LOAD_BATCH):
        await backend.enqueue(jobs[start : start + LOAD_BATCH])
    now = batch_at + 1.0
    if before_timed is not None:
        await before_timed(now)
    moved = 0
    n_calls = 0
    next_due: float | None = None
    started = time.perf_counter()
    while moved < due:
        got, next_due = await backend.promote_due(now, LIMIT)
        n_calls += 1
        moved += got
        if got == 0:
            break
    elapsed = time.perf_counter() - started
    if moved != due:
        raise RuntimeError(f"{target.name}: promoted {moved} of {due} due jobs")
    if next_due is None or next_due <= now:
        raise RuntimeError(f"{target.name}: next due {next_due} is not in the future")
    return elapsed * 1000, n_calls


async def _rounds(
    subjects: list[tuple[Target, Clock]],
    due: int,
    rounds: int,
    before_timed: Callable[[float], Awaitable[None]] | None = None,
) -> list[dict[str, Any]]:
    """One untimed warm-up round each, then ``rounds`` timed rounds, the subjects alternating
    (and their order flipping every round) so that machine noise falls on all of them alike.
    ``before_timed`` runs once, in the first subject's warm-up round, with its "now"."""
    timings: list[list[float]] = [[] for _ in subjects]
    calls: list[list[int]] = [[] for _ in subjects]
    for r in range(rounds + 1):
        order = list(range(len(subjects)))
        if r % 2:
            order.reverse()
        for k in order:
            target, clock = subjects[k]
            hook = before_timed if r == 0 and k == 0 else None
            ms, n_calls = await _round(target, clock, due, hook)
            if r > 0:
                timings[k].append(ms)
                calls[k].append(n_calls)
    load = _load()
    return [
        {
            "median_ms": statistics.median(t),
            "min_ms": min(t),
            "max_ms": max(t),
            "timings_ms": [round(x, 3) for x in t],
            "calls_per_round": c,
            "loadavg_1m": load,
        }
        for t, c in zip(timings, calls, strict=True)
    ]


async def _fill(
    target: Target, clock: Clock, rng: random.Random, count: int, deadline: float | None
) -> dict[str, Any]:
    """Enqueue ``count`` far-future jobs in batches of LOAD_BATCH (stop at ``deadline``)."""
    added = 0
    started = time.perf_counter()
    while added < count:
        if deadline is not None and time.perf_counter() >= deadline:
            break
        n = min(LOAD_BATCH, count - added)
        jobs = [_job(clock.now, clock.far_future(rng)) for _ in range(n)]
        await target.backend.enqueue(jobs)
        added += n
    seconds = time.perf_counter() - started
    return {
        "added": added,
        "seconds": round(seconds, 2),
        "jobs_per_s": round(added / seconds) if seconds > 0 else None,
    }


async def run_target(name: str, args: argparse.Namespace) -> dict[str, Any]:
    target = TARGETS[name](args)
    control = TARGETS[name](args)  # stays at 1k pending; timed alternately with `target`
    started = time.perf_counter()
    rng = random.Random(f"{name}-promote-scale")
    clock, control_clock = Clock(), Clock()
    result: dict[str, Any] = {
        "backend": name,
        "where": target.describe(),
        "control": control.describe(),
    }
    print(f"[{name}] {target.describe()}", file=sys.stderr, flush=True)
    try:
        await target.backend.open()
        await control.backend.open()
        await _fill(target, clock, rng, BASELINE_PENDING, None)
        await _fill(control, control_clock, rng, BASELINE_PENDING, None)
        subjects = [(target, clock), (control, control_clock)]
        plans: dict[str, list[str]] = {}

        async def explain_small(now: float) -> None:
            plans["small"] = await target.explain(now)

        small, control_small = await _rounds(subjects, args.due, args.rounds, explain_small)
        result["small"] = small
        result["control_small"] = control_small
        print(f"[{name}] 1k pending: {small['median_ms']:.2f} ms", file=sys.stderr, flush=True)
        before = await target.footprint()
        deadline = started + args.budget - RESERVE
        fill = await _fill(target, clock, rng, args.pending - BASELINE_PENDING, deadline)
        pending = BASELINE_PENDING + fill["added"]
        print(
            f"[{name}] loaded {fill['added']} in {fill['seconds']} s ({fill['jobs_per_s']} jobs/s)",
            file=sys.stderr,
            flush=True,
        )
        after = await target.footprint()

        async def explain_large(now: float) -> None:
            plans["large"] = await target.explain(now)

        large, control_large = await _rounds(subjects, args.due, args.rounds, explain_large)
        print(
            f"[{name}] {pending} pending: {large['median_ms']:.2f} ms"
            f" (control, 1k pending, same period: {control_large['median_ms']:.2f} ms)",
            file=sys.stderr,
        )
        added = fill["added"]
        result.update(
            pending_small=BASELINE_PENDING,
            pending_large=pending,
            reached_target=pending >= args.pending,
            fill=fill,
            large=large,
            ratio=large["median_ms"] / small["median_ms"],
            control_large=control_large,
            ratio_vs_control=large["median_ms"] / control_large["median_ms"],
            footprint_small=before,
            footprint_large=after,
            bytes_per_pending=(after["bytes"] - before["bytes"]) / added if added else None,
            plans=plans,
        )
        if name == "redis" and added:
            result["used_memory_per_pending"] = (
                after["used_memory"] - before["used_memory"]
            ) / added
    finally:
        await target.cleanup()
        await control.cleanup()
        result["seconds"] = round(time.perf_counter() - started, 1)
    return result


def _fmt_pending(n: int, target: int) -> str:
    text = f"{n:,}"
    return text if n >= target else f"{text} (of {target:,}: time budget)"


def render(results: list[dict[str, Any]], args: argparse.Namespace) -> str:
    lines = [
        f"| backend | promote {args.due:,} due, {BASELINE_PENDING:,} pending (ms) "
        "| pending reached | promote, with that many pending (ms) | ratio "
        "| control (1k pending, same period, ms) | ratio vs control | bytes/pending job |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        if "error" in r:
            lines.append(f"| {r['backend']} | error: {r['error']} | | | | | | |")
            continue
        small, large, ctl = r["small"], r["large"], r["control_large"]
        per = r["bytes_per_pending"]
        extra = ""
        if r["backend"] == "redis" and r.get("used_memory_per_pending") is not None:
            extra = f" (used_memory: {r['used_memory_per_pending']:.0f})"
        lines.append(
            f"| {r['backend']} "
            f"| {small['median_ms']:.2f} ({small['min_ms']:.2f}{DASH}{small['max_ms']:.2f}) "
            f"| {_fmt_pending(r['pending_large'], args.pending)} "
            f"| {large['median_ms']:.2f} ({large['min_ms']:.2f}{DASH}{large['max_ms']:.2f}) "
            f"| {r['ratio']:.2f} "
            f"| {ctl['median_ms']:.2f} ({ctl['min_ms']:.2f}{DASH}{ctl['max_ms']:.2f}) "
            f"| {r['ratio_vs_control']:.2f} "
            f"| {per:.0f}{extra} |"
        )
    return "\n".join(lines)


async def amain(args: argparse.Namespace) -> list[dict[str, Any]]:
    results = []
    for name in args.backends:
        try:
            results.append(await run_target(name, args))
        except Exception as exc:  # report the others anyway
            print(f"[{name}] failed: {exc!r}", file=sys.stderr, flush=True)
            results.append({"backend": name, "error": repr(exc)})
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pending", type=int, default=1_000_000)
    parser.add_argument(
        "--entries",
        choices=("jobs", "watches"),
        default="jobs",
        help="pending delayed jobs, or pending watches (unique key + key index each)",
    )
    parser.add_argument("--due", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=15, help="timed rounds per state (>= 5)")
    parser.add_argument("--backends", default="sqlite,redis,postgres")
    parser.add_argument(
        "--budget", type=float, default=360.0, help="seconds per backend (loading stops early)"
    )
    parser.add_argument("--redis", default=os.environ.get("BENCH_PS_REDIS", DEFAULT_REDIS))
    parser.add_argument("--pg", default=os.environ.get("BENCH_PS_PG", DEFAULT_PG))
    args = parser.parse_args(argv)
    ENTRIES["kind"] = args.entries
    args.backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    unknown = [b for b in args.backends if b not in TARGETS]
    if unknown:
        parser.error(f"unknown backend(s) {unknown}; choose from {sorted(TARGETS)}")
    if args.pending < BASELINE_PENDING:
        parser.error(f"--pending must be at least {BASELINE_PENDING}")
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    loadavg = _load()
    results = asyncio.run(amain(args))
    report = {
        "argv": sys.argv[1:] if argv is None else argv,
        "pending": args.pending,
        "entries": args.entries,
        "due": args.due,
        "rounds": args.rounds,
        "limit": LIMIT,
        "load_batch": LOAD_BATCH,
        "cpus": os.cpu_count(),
        "loadavg_1m_start": loadavg,
        "loadavg_1m_end": _load(),
        "results": results,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    results_file = RESULTS.with_stem(f"{RESULTS.stem}_{args.entries}")
    results_file.write_text(json.dumps(report, indent=2) + "\n")
    print(render(results, args))
    print(f"\nraw: {results_file}")
    return 1 if any("error" in r for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
