"""2. Deploy: SIGTERM every worker mid-load and start new ones, twice.

Short jobs (well inside the grace period): lost = 0, duplicate runs = 0, every job
``succeeded`` with ``attempts == 1`` (nothing counted as failed or retried), and every old worker
exits 0 within its grace period. "Recovery" is the slowest old worker's SIGTERM -> exit.

2b (same fleet settings, grace 1 s): jobs that outlive the grace period are handed back (not
failed, ``attempts`` not charged) and run again by the new workers; their extra runs are bounded
by the jobs running at the SIGTERM.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

from chaos import harness as h

NAME = "2 deploy"
NAME_B = "2b deploy, jobs > grace"


def run(kind: str, workdir: Path, short: bool = False, tiny: bool = False) -> list[h.Result]:
    first = _short_jobs(kind, workdir, short, waves=1 if tiny else 2)
    if tiny:
        return [first]
    return [first, _long_jobs(kind, workdir, short)]


def _short_jobs(kind: str, workdir: Path, short: bool, waves: int = 2) -> h.Result:
    n = 600 if short else 3_000
    workers, concurrency, grace = 4, 8, 10.0
    result = h.Result(NAME, kind, jobs=n, ok=True, bound=0)
    url = h.fresh_url(kind, workdir)
    try:
        with (
            h.producer(url) as app,
            h.fleet(
                url, workdir / f"s2-{kind}", concurrency=concurrency, lease=2.0, grace=grace
            ) as fleet,
        ):
            tokens = [h.token() for _ in range(n)]
            half = n // 2

            def per_job() -> tuple[int]:
                return (random.randint(20, 250),)

            ids = h.enqueue_tokens(app, "chaos.work", tokens[:half], per_job=per_job)
            ids |= h.enqueue_tokens(app, "chaos.awork", tokens[half:], per_job=per_job)
            old = fleet.start(workers)
            drains: list[float] = []
            for wave in range(waves):
                fleet.wait_registered(app)
                time.sleep(1.5 if short else 4.0)
                running = h.queue_totals(app)[2]
                h.say(
                    f"{NAME}/{kind}: deploy {wave + 1}: "
                    f"SIGTERM {len(old)} workers ({running} jobs running)"
                )
                fleet.term(old)
                new = fleet.start(workers)
                waited = fleet.wait_exit(old, grace + 15)
                for pid, took in waited.items():
                    result.check(
                        took is not None, f"worker {pid} still alive {grace + 15:g}s after SIGTERM"
                    )
                    if took is not None:
                        drains.append(took)
                        code = fleet.exits[pid][0]
                        result.check(code == 0, f"worker {pid} exited with {code} after SIGTERM")
                old = new
            took = h.wait_idle(app, timeout=120)
            result.check(took is not None, "jobs still pending 120 s after the deploys")
            fleet.stop(app=app)
            jobs = h.all_jobs(app)
            stats = app.stats(5)
        runs = h.read_runs(fleet.marks)
        result.lost = sum(1 for t in tokens if h.completed(runs, t) == 0)
        result.duplicates = h.duplicates(runs, tokens)
        result.recovery = max(drains) if drains else None
        result.recovery_bound = grace
        bad = [
            t
            for t in tokens
            if ids[t] not in jobs
            or jobs[ids[t]].status != "succeeded"
            or jobs[ids[t]].attempts != 1
        ]
        failed = sum(row.failed for row in stats)
        retried = sum(row.retried for row in stats)
        result.check(result.lost == 0, f"{result.lost} jobs never completed a run")
        result.check(result.duplicates == 0, f"{result.duplicates} duplicate runs")
        result.check(not bad, f"{len(bad)} jobs not succeeded with attempts=1")
        result.check(failed == 0 and retried == 0, f"counters: {failed} failed, {retried} retried")
        result.notes.append(f"{waves} deploys; SIGTERM->exit in the recovery column")
    finally:
        h.drop(url)
    return result


def _long_jobs(kind: str, workdir: Path, short: bool) -> h.Result:
    n = 12
    workers, concurrency, grace = 2, 8, 1.0
    result = h.Result(NAME_B, kind, jobs=n, ok=True)
    url = h.fresh_url(kind, workdir)
    try:
        with (
            h.producer(url) as app,
            h.fleet(
                url, workdir / f"s2b-{kind}", concurrency=concurrency, lease=2.0, grace=grace
            ) as fleet,
        ):
            tokens = [h.token() for _ in range(n)]
            ids = h.enqueue_tokens(app, "chaos.work", tokens[: n // 2], 4000)
            ids |= h.enqueue_tokens(app, "chaos.awork", tokens[n // 2 :], 4000)
            old = fleet.start(workers)
            fleet.wait_registered(app)
            time.sleep(1.5)
            at = time.time()
            fleet.term(old)
            fleet.start(workers)
            waited = fleet.wait_exit(old, grace + 15)
            drains = [t for t in waited.values() if t is not None]
            result.check(len(drains) == len(old), "an old worker did not stop")
            for pid in old:
                code = fleet.exits.get(pid, (None,))[0]
                result.check(code == 0, f"worker {pid} exited with {code} after SIGTERM")
            took = h.wait_idle(app, timeout=60)
            result.check(took is not None, "jobs still pending 60 s after the deploy")
            fleet.stop(app=app)
            jobs = h.all_jobs(app)
            stats = app.stats(5)
        runs = h.read_runs(fleet.marks)
        exposed: set[str] = set()
        for pid in old:
            exposed |= h.in_flight(runs, pid, at)
        result.lost = sum(1 for t in tokens if h.completed(runs, t) == 0)
        result.duplicates = h.duplicates(runs, tokens)
        result.bound = len(exposed)
        result.recovery = max(drains) if drains else None
        result.recovery_bound = grace + 5  # + the 5 s duly waits for cancelled tasks
        bad = [
            t
            for t in tokens
            if ids[t] not in jobs
            or jobs[ids[t]].status != "succeeded"
            or jobs[ids[t]].attempts != 1
        ]
        failed = sum(row.failed for row in stats)
        result.check(result.lost == 0, f"{result.lost} jobs never completed a run")
        result.check(
            result.duplicates <= result.bound,
            f"{result.duplicates} duplicate runs > {result.bound}",
        )
        seen = [(jobs[ids[t]].status, jobs[ids[t]].attempts) for t in bad if ids[t] in jobs]
        result.check(not bad, f"{len(bad)} jobs not succeeded with attempts=1: {seen[:4]}")
        result.check(failed == 0, f"counters: {failed} failed")
        result.notes.append("4 s jobs, grace 1 s: handed back, run again")
    finally:
        h.drop(url)
    return result
