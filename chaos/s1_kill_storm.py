"""1. Kill storm: SIGKILL a random worker every 1-3 s while 4 workers chew through short jobs.

Lost = 0 (every job completed a run, by the marks) and every job ends ``succeeded``. Every run
that was followed by another run of the same job must have been in a process we killed, and the
duplicate runs are at most the jobs in flight at the kills (those the backend held for the dead
process, plus those the marks show mid-run there). Recovery (kill -> the orphan's next start in
another process) must stay within lease + one recovery interval (+ the re-claim, see docs).
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

from chaos import harness as h

NAME = "1 kill storm"
LEASE = 2.0
RECOVER_EVERY = max(LEASE / 4, 0.5)  # duly.worker.Worker._maintenance_loop
CLAIM_SLACK = 1.0  # re-claim + start after the recovery pass, on a loaded 2-core machine


def run(kind: str, workdir: Path, short: bool = False, tiny: bool = False) -> h.Result:
    n = 300 if tiny else 1_000 if short else 10_000
    storm = 4.0 if tiny else 8.0 if short else 60.0
    workers, concurrency = 4, 8
    # ~n / (4 * 8 / 0.2 s) = the storm's length: the queue is still full when it ends.
    ms = (20, 180) if short else (100, 300)
    result = h.Result(NAME, kind, jobs=n, ok=True)
    url = h.fresh_url(kind, workdir)
    rundir = workdir / f"s1-{kind}"
    try:
        with (
            h.producer(url) as app,
            h.fleet(url, rundir, concurrency=concurrency, lease=LEASE, grace=5) as fleet,
        ):
            tokens = [h.token() for _ in range(n)]
            half = n // 2

            def per_job() -> tuple[int]:
                return (random.randint(*ms),)

            ids = h.enqueue_tokens(app, "chaos.work", tokens[:half], per_job=per_job)
            ids |= h.enqueue_tokens(app, "chaos.awork", tokens[half:], per_job=per_job)
            h.say(f"{NAME}/{kind}: {n} jobs enqueued; {workers} workers; storm {storm:g}s")
            fleet.start(workers)
            kills: list[tuple[int, float, set[str]]] = []
            end = time.monotonic() + storm
            while time.monotonic() < end:
                time.sleep(h.jitter(1.0, 3.0))
                crashed = fleet.reap()
                result.check(not crashed, f"workers exited on their own: {crashed}")
                for _ in crashed:
                    fleet.spawn()
                pid = random.choice(fleet.alive())
                at = fleet.kill(pid)
                held = h.held_by(app, pid)
                kills.append((pid, at, held))
                fleet.spawn()
            h.say(f"{NAME}/{kind}: {len(kills)} kills; draining")
            took = h.wait_idle(app, timeout=180)
            result.check(took is not None, "jobs still pending 180 s after the storm")
            fleet.stop(app=app)
            crashed = [
                pid
                for pid, (code, _) in fleet.exits.items()
                if pid not in fleet.killed and code != 0
            ]
            result.check(not crashed, f"workers exited with errors: {crashed}")
            jobs = h.all_jobs(app)
        runs = h.read_runs(fleet.marks)
        dead = set(fleet.killed)
        result.lost = sum(1 for t in tokens if h.completed(runs, t) == 0)
        not_ok = [
            t for t in tokens if (jobs.get(ids[t]) is None or jobs[ids[t]].status != "succeeded")
        ]
        result.duplicates = h.duplicates(runs, tokens)
        exposed = 0  # (kill, job) pairs: a job may be caught by several kills
        recoveries: list[tuple[float, str, int, float]] = []  # (seconds, token, pid, kill time)
        orphaned = [(pid, at, held | h.in_flight(runs, pid, at)) for pid, at, held in kills]
        for pid, at, orphans in orphaned:
            exposed += len(orphans)
            for tok in orphans:
                nxt = h.next_start(runs, tok, at, pid)
                if nxt is None:
                    continue
                # Re-claimed by a process that was killed before it started the job: it was
                # recovered before that later kill (which measures its own recovery), so the
                # later kill's time bounds this recovery from above.
                again = [
                    at2 for p2, at2, o2 in orphaned if p2 != pid and at < at2 < nxt and tok in o2
                ]
                recoveries.append((min([nxt, *again]) - at, tok, pid, at))
        result.bound = exposed
        result.recovery = max(recoveries)[0] if recoveries else None
        result.recovery_bound = LEASE + RECOVER_EVERY
        _save(rundir, kills, recoveries)
        result.check(result.lost == 0, f"{result.lost} jobs never completed a run")
        result.check(
            not not_ok, f"{len(not_ok)} jobs not succeeded, e.g. {_describe(jobs, ids, not_ok[:3])}"
        )
        # A job quarantined by max_lost whose every run was in a process we SIGKILLed is not a
        # lost job but an unlucky one: the quarantine cannot tell our kills from a poison pill.
        for tok in not_ok:
            info = jobs.get(ids[tok])
            rs = runs.get(tok, [])
            if (
                info is not None
                and info.status == "failed"
                and rs
                and all(r.pid in dead for r in rs)
            ):
                into = ", ".join(f"{(fleet.killed[r.pid] - r.start) * 1000:.0f}" for r in rs)
                result.notes.append(
                    f"{info.id} quarantined (lost={info.lost}): each of its {len(rs)} runs was in "
                    f"a process we SIGKILLed, {into} ms after it started"
                )
        result.check(
            result.duplicates <= result.bound,
            f"{result.duplicates} duplicate runs > {result.bound} jobs in flight at the kills",
        )
        bad = h.unexplained_reruns(runs, tokens, dead)
        result.check(bad == 0, f"{bad} re-runs after a run in a process that was NOT killed")
        if result.recovery is not None:
            limit = result.recovery_bound + CLAIM_SLACK
            slow = sorted((r for r in recoveries if r[0] > limit), reverse=True)
            result.check(
                not slow,
                f"slowest recovery {result.recovery:.2f}s > lease+interval+{CLAIM_SLACK:g}s "
                f"({len(slow)} of {len(recoveries)} recoveries over; slowest: token {slow[0][1]} "
                f"orphaned by the kill of {slow[0][2]})"
                if slow
                else "",
            )
        result.notes.append(f"{len(kills)} SIGKILLs")
        if took is not None:
            result.notes.append(f"drained {took:.0f}s after the storm")
    finally:
        h.drop(url)
    return result


def _save(rundir: Path, kills: list[tuple[int, float, set[str]]], recoveries: list[tuple]) -> None:
    """The kills and recoveries, next to the marks (for a post-mortem of a slow recovery)."""
    data = {
        "kills": [{"pid": pid, "at": at, "held": sorted(held)} for pid, at, held in kills],
        "recoveries": [
            {"seconds": sec, "token": tok, "pid": pid, "kill_at": at}
            for sec, tok, pid, at in sorted(recoveries, reverse=True)
        ],
    }
    (rundir / "kills.json").write_text(json.dumps(data, indent=1))


def _describe(jobs: dict, ids: dict[str, str], toks: list[str]) -> str:
    out = []
    for t in toks:
        info = jobs.get(ids[t])
        out.append("missing" if info is None else f"{info.id}:{info.status}:a{info.attempts}")
    return ", ".join(out)
