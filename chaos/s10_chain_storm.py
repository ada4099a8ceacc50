"""10. Chain storm: SIGKILL a random worker every 1-3 s while chains of 3 steps drain.

Each chain is ``work(t1) -> pipe(t2) -> pipe(t3)`` (a ``pipe`` step takes the previous step's
result and returns ``"<previous>><token>"``). At the end no step may be stuck (waiting,
queued or running), each later step must have been released exactly once if the step before
it succeeded and never otherwise (its ``scheduled``/``cancelled -> queued`` events), and a chain
whose steps all succeeded must end with ``"t1>t2>t3"``: each step got the result of the one
before. A step quarantined by our kills (lost its worker ``max_lost`` times) fails its chain:
the steps after it are cancelled, counted apart. Re-runs are bounded by the steps in flight at
the kills, as for any job.
"""

from __future__ import annotations

import asyncio
import random
import time
from pathlib import Path

import duly
from chaos import harness as h

NAME = "10 chain storm"
LEASE = 2.0
STEPS = 3
WAITING = ("scheduled", "cancelled")


async def _releases(app: duly.App, since: str, steps: set[str]) -> dict[str, int]:
    """Per step: how many times it went from waiting (or cancelled) to ``queued``."""
    backend = await app.backend()
    last: dict[str, str] = {}
    released = dict.fromkeys(steps, 0)
    cursor = since
    while True:
        page, cursor = await backend.events.read(cursor, None, 1000)
        if not page:
            break
        for ev in page:
            if ev.job_id in steps:
                if last.get(ev.job_id) in WAITING and ev.status == "queued":
                    released[ev.job_id] += 1
                last[ev.job_id] = ev.status
    await app.aclose()
    return released


def run(kind: str, workdir: Path, short: bool = False, tiny: bool = False) -> h.Result:
    chains = 20 if tiny else 200 if short else 1_000
    storm = 4.0 if tiny else 8.0 if short else 60.0
    ms = (20, 120) if tiny else (100, 300)
    result = h.Result(NAME, kind, jobs=chains * STEPS, ok=True)
    url = h.fresh_url(kind, workdir)
    rundir = workdir / f"s10-{kind}"
    try:
        with (
            h.producer(url) as app,
            h.fleet(url, rundir, concurrency=8, lease=LEASE, grace=5) as fleet,
        ):
            since = asyncio.run(_head(app))
            work, pipe = app.tasks["chaos.work"], app.tasks["chaos.pipe"]
            made: list[tuple[duly.Workflow, list[str]]] = []
            for _ in range(chains):
                tokens = [h.token() for _ in range(STEPS)]
                steps = [work.s(tokens[0], random.randint(*ms))]
                steps += [pipe.s(t, random.randint(*ms)) for t in tokens[1:]]
                made.append((app.chain(*steps), tokens))
            h.say(f"{NAME}/{kind}: {chains} chains of {STEPS} enqueued; storm {storm:g}s")
            fleet.start(4)
            kills: list[tuple[int, float, set[str]]] = []
            end = time.monotonic() + storm
            while time.monotonic() < end:
                time.sleep(h.jitter(1.0, 3.0))
                for _ in fleet.reap():
                    fleet.spawn()
                pid = random.choice(fleet.alive())
                at = fleet.kill(pid)
                kills.append((pid, at, h.held_by(app, pid)))
                fleet.spawn()
            took = h.wait_idle(app, timeout=180)
            result.check(took is not None, "jobs still pending 180 s after the storm")
            fleet.stop(app=app)
            infos = [app.get_workflow(wf.id) for wf, _ in made]
            ids = {j.id for wf, _ in made for j in wf.jobs[1:]}
            released = asyncio.run(_releases(app, since, ids))
        runs = h.read_runs(fleet.marks)
        dead = set(fleet.killed)
        tokens = [t for _, ts in made for t in ts]
        stuck = wrong = twice = failed = 0
        for (_, ts), info in zip(made, infos, strict=True):
            if info is None or len(info.jobs) != STEPS:
                stuck += 1
                continue
            stuck += sum(j.status not in ("succeeded", "failed", "cancelled") for j in info.jobs)
            for before, step in zip(info.jobs, info.jobs[1:], strict=False):
                want = 1 if before.status == "succeeded" else 0
                twice += released[step.id] != want
            if info.status == "succeeded":
                wrong += info.jobs[-1].result != ">".join(ts)
            else:
                failed += 1
        if failed:
            result.notes.append(f"{failed} chains failed by a step our kills quarantined")
        result.duplicates = h.duplicates(runs, tokens)
        result.bound = sum(
            len({t for t in tokens if t in held | h.in_flight(runs, pid, at)})
            for pid, at, held in kills
        )
        result.check(stuck == 0, f"{stuck} steps stuck")
        result.check(twice == 0, f"{twice} steps not released exactly once")
        result.check(wrong == 0, f"{wrong} chains with a wrong result")
        bad = h.unexplained_reruns(runs, tokens, dead)
        result.check(bad == 0, f"{bad} re-runs after a run in a process NOT killed")
        result.notes.append(f"{len(kills)} SIGKILLs; 0 stuck, every step released once")
    finally:
        h.drop(url)
    return result


async def _head(app: duly.App) -> str:
    _, head = await (await app.backend()).events.read(None, None, 1)
    await app.aclose()
    return head
