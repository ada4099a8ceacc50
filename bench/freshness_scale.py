"""Freshness at scale (issue 13, item 4): 100,000 scopes per backend.

    python -m bench.freshness_scale [--scopes 100000] [--due 1000] [--rounds 7] [--checks 2000]
                                    [--backends sqlite,redis,postgres]

For each backend, two namespaces of their own, removed at the end (SQLite: temp files; Redis:
``bench_fs_<hex>`` on 127.0.0.1:6379 db 0; PostgreSQL: schema ``bench_fs_<hex>``):

- the **subject** gets ``--scopes`` scopes: each one requested (a full sync enqueued), its sync
  claimed and finished as succeeded (so every scope is synced, its next baseline at its own
  offset in the hour), and the finished jobs purged, all in batches of 1,000;
- the **control** gets ``--due`` scopes the same way.

Then, alternating subject and control (order flipped every round), ``--rounds`` times after an
untimed warm-up round (PostgreSQL: after ``VACUUM (ANALYZE)`` of the loaded tables, as
autovacuum would do, so the load's dead index entries are not timed):

- **sweep**: "now" is set so that exactly ``--due`` scopes are due (the subject: the next
  ``--due`` baselines in order; the control: all of its scopes, one ``full_every`` later each
  round) and ``duly.freshness.sweep(app, backend, now, limit=--due)`` is timed: the due index
  read plus one baseline request per due scope (each enqueues a sync). Untimed, the syncs are
  then claimed and finished, so the scopes are idle again;
- **check**: ``--checks // rounds`` single ``check()`` round trips on random scopes of each
  namespace at a time when they are current (nothing to enqueue), each timed.

Reported: sweep median per namespace and the ratio subject / control (the issue asks for it to
stay within 20 %: the sweep costs the scopes due, not the scopes known), the median of each
round's subject / control pair, check p50 / p99 over all samples, and bytes per scope (the
freshness structures only, jobs purged: SQLite ``dbstat`` pages of the table and its indexes;
PostgreSQL ``pg_total_relation_size`` of ``freshness``; Redis ``MEMORY USAGE`` of every ``f:``
hash plus ``fd:<name>`` and ``fs:<name>``). The machine is shared: only ratios measured in the
same run mean much. Writes
``bench/results/freshness_scale.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import secrets
import sqlite3
import statistics
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import duly
from duly._freshness import Mirror, sweep
from duly.backends.base import Backend

RESULTS = Path(__file__).resolve().parent / "results" / "freshness_scale.json"
REDIS = "redis://127.0.0.1:6379/0"
PG = "postgresql://postgres@127.0.0.1:5432/test"
NAME = "bench"
BATCH = 1000
FULL_EVERY = 3600.0
T0 = 1_800_000_000.0
WORKER = "bench-freshness"


def noop_sync(scope: str, full: bool) -> None:
    """The sync task (never run: the bench finishes its jobs through the backend)."""


class Side:
    """One namespace: its App (for the Mirror's request building), backend and scopes."""

    def __init__(self, url: str, namespace: str, count: int) -> None:
        self.app = duly.App(url, namespace=namespace)
        self.mirror: Mirror = self.app.freshness(
            NAME, sync=noop_sync, max_staleness=timedelta(hours=2), full_every=FULL_EVERY
        )
        self.scopes = [f"team:{n}" for n in range(count)]
        self.backend: Backend | None = None

    async def open(self) -> Backend:
        self.backend = await self.app.backend()
        return self.backend

    async def drain(self, now: float) -> None:
        """Claim and finish (succeeded) every queued sync, in batches."""
        assert self.backend is not None
        while claimed := await self.backend.claim(WORKER, ["default"], BATCH, now, now + 600):
            outcomes = [duly.Outcome(r.id, "succeeded", None, None, None, now) for r in claimed]
            await self.backend.finish(WORKER, outcomes, now)

    async def load(self, now: float) -> None:
        assert self.backend is not None
        for start in range(0, len(self.scopes), BATCH):
            batch = self.scopes[start : start + BATCH]
            requests = [self.mirror._request(s, "request", False, now) for s in batch]
            await self.backend.freshness.sync(requests, now)
            await self.drain(now)
        while await self.backend.purge(now + 1, 10_000, 10**9):
            pass

    async def due_times(self) -> list[float]:
        """Every scope's next_due, sorted."""
        assert self.backend is not None
        rows = await self.backend.freshness.scopes(NAME, T0, False, len(self.scopes))
        assert len(rows) == len(self.scopes), (len(rows), len(self.scopes))
        return sorted(r.next_due for r in rows if r.next_due is not None)


async def _timed(coro: Any) -> float:
    start = time.perf_counter()
    await coro
    return time.perf_counter() - start


async def bytes_per_scope(kind: str, side: Side, url: str, namespace: str) -> float:
    backend = side.backend
    assert backend is not None
    count = len(side.scopes)
    if kind == "postgres":
        import psycopg

        async with await psycopg.AsyncConnection.connect(PG) as conn:
            cur = await conn.execute(
                "SELECT pg_total_relation_size(%s)", (f'"{namespace}".freshness',)
            )
            row = await cur.fetchone()
            assert row is not None
            return float(row[0]) / count
    if kind == "sqlite":
        path = url.removeprefix("sqlite:///")
        with sqlite3.connect(path) as conn:
            names = ("freshness", "freshness_due", "freshness_stale", "freshness_job")
            marks = ",".join("?" * len(names))
            [(size,)] = conn.execute(
                f"SELECT sum(pgsize) FROM dbstat WHERE name IN ({marks})", names
            ).fetchall()
        return float(size) / count
    from redis.asyncio import Redis

    client = Redis.from_url(REDIS)
    prefix = "{" + namespace + "}:"
    total = 0
    try:
        keys = [k async for k in client.scan_iter(match=prefix.replace("{", "\\{") + "f*")]
        for start in range(0, len(keys), 1000):
            pipe = client.pipeline(transaction=False)
            for key in keys[start : start + 1000]:
                pipe.memory_usage(key, samples=0)
            total += sum(n or 0 for n in await pipe.execute())
    finally:
        await client.aclose()
    return total / count


def _url(kind: str, tmp: Path, namespace: str) -> str:
    if kind == "sqlite":
        return f"sqlite:///{tmp}/{namespace}.db"
    return REDIS if kind == "redis" else PG


async def run_backend(kind: str, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    sides = []
    for count in (args.scopes, args.due):
        namespace = f"bench_fs_{secrets.token_hex(4)}"
        side = Side(_url(kind, tmp, namespace), namespace, count)
        await side.open()
        sides.append((side, namespace))
    (subject, subject_ns), (control, _control_ns) = sides
    try:
        started = time.perf_counter()
        for side, _ in sides:
            await side.load(T0)
        load_s = time.perf_counter() - started
        if kind == "postgres":  # as autovacuum would, before timing: the load's dead rows
            for _side, ns in sides:
                await _vacuum(ns)
        size = await bytes_per_scope(kind, subject, _url(kind, tmp, subject_ns), subject_ns)
        subject_due = await subject.due_times()
        control_due = await control.due_times()
        control_base = control_due[-1]
        sweeps: dict[str, list[float]] = {"subject": [], "control": []}
        checks: list[float] = []
        rng = random.Random(7)
        for round_no in range(args.rounds + 1):
            window = subject_due[round_no * args.due : (round_no + 1) * args.due]
            plans = [
                ("subject", subject, window[-1]),
                ("control", control, control_base + round_no * FULL_EVERY),
            ]
            if round_no % 2:
                plans.reverse()
            for label, side, now in plans:
                assert side.backend is not None
                took = await _timed(sweep(side.app, side.backend, now, args.due))
                await side.drain(now)
                if round_no:  # round 0 warms up
                    sweeps[label].append(took)
                for _ in range(args.checks // args.rounds // 2 if round_no else 0):
                    scope = rng.choice(side.scopes)
                    checks.append(await _timed(side.mirror.check_async(scope)))
        subject_med = statistics.median(sweeps["subject"])
        control_med = statistics.median(sweeps["control"])
        pairs = [s / c for s, c in zip(sweeps["subject"], sweeps["control"], strict=True)]
        quantiles = statistics.quantiles(checks, n=100)
        return {
            "backend": kind,
            "scopes": args.scopes,
            "due": args.due,
            "load_s": round(load_s, 1),
            "sweep_ms_subject": round(subject_med * 1000, 2),
            "sweep_ms_control": round(control_med * 1000, 2),
            "sweep_ratio": round(subject_med / control_med, 3),
            "sweep_ms_subject_range": [
                round(min(sweeps["subject"]) * 1000, 1),
                round(max(sweeps["subject"]) * 1000, 1),
            ],
            "sweep_ms_control_range": [
                round(min(sweeps["control"]) * 1000, 1),
                round(max(sweeps["control"]) * 1000, 1),
            ],
            "sweep_ratio_of_pairs_median": round(statistics.median(pairs), 3),
            "check_ms_p50": round(statistics.median(checks) * 1000, 3),
            "check_ms_p99": round(quantiles[98] * 1000, 3),
            "check_samples": len(checks),
            "bytes_per_scope": round(size, 1),
        }
    finally:
        for side, namespace in sides:
            assert side.backend is not None
            await side.backend.drop()
            if kind == "postgres":
                await _drop_schema(namespace)
            await side.app.aclose()


async def _vacuum(schema: str) -> None:
    import psycopg

    async with await psycopg.AsyncConnection.connect(PG, autocommit=True) as conn:
        await conn.execute(f'VACUUM (ANALYZE) "{schema}".freshness')
        await conn.execute(f'VACUUM (ANALYZE) "{schema}".jobs')


async def _drop_schema(schema: str) -> None:
    import psycopg

    async with await psycopg.AsyncConnection.connect(PG, autocommit=True) as conn:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def main() -> None:
    """Run the bench and print one markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scopes", type=int, default=100_000)
    parser.add_argument("--due", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--checks", type=int, default=2000)
    parser.add_argument("--backends", default="sqlite,redis,postgres")
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for kind in args.backends.split(","):
            result = asyncio.run(run_backend(kind, args, Path(tmp)))
            print(json.dumps(result), flush=True)
            results.append(result)
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    print(
        "| backend | scopes | sweep 1,000 due (ms): among N / among 1,000 | ratio | "
        "check() p50 / p99 (ms) | bytes/scope |"
    )
    print("|---|---|---|---|---|---|")
    for r in results:
        print(
            f"| {r['backend']} | {r['scopes']:,} | {r['sweep_ms_subject']} / "
            f"{r['sweep_ms_control']} | {r['sweep_ratio']} | {r['check_ms_p50']} / "
            f"{r['check_ms_p99']} | {r['bytes_per_scope']} |"
        )


if __name__ == "__main__":
    main()
