"""8. Group storm: SIGKILL a random worker every 1-3 s while groups of short jobs drain.

Each group has 5 members and an ``on_complete`` job. Every group must complete, counting each
member's outcome as the member shows it (succeeded; or failed, for a member quarantined after
losing its worker to our kills ``max_lost`` times), its callback must be queued exactly once
(one ``scheduled -> queued`` event: the group's completion) and must complete a run (the
marks), and any callback run followed by another must have been in a process we killed (an
at-least-once run of the callback itself, like any job, bounded by the callbacks in flight at
the kills).
"""

from __future__ import annotations

import asyncio
import random
import time
from pathlib import Path

import duly
from chaos import harness as h

NAME = "8 group storm"
LEASE = 2.0
MEMBERS = 5
OUTCOMES = ("succeeded", "failed", "cancelled")


async def _callback_wakeups(app: duly.App, since: str, callbacks: set[str]) -> dict[str, int]:
    """Per callback job: how many times it went from ``scheduled`` to ``queued``."""
    backend = await app.backend()
    last: dict[str, str] = {}
    woken = dict.fromkeys(callbacks, 0)
    cursor = since
    while True:
        page, cursor = await backend.events.read(cursor, None, 1000)
        if not page:
            break
        for ev in page:
            if ev.job_id in callbacks:
                if last.get(ev.job_id) == "scheduled" and ev.status == "queued":
                    woken[ev.job_id] += 1
                last[ev.job_id] = ev.status
    await app.aclose()
    return woken


def run(kind: str, workdir: Path, short: bool = False, tiny: bool = False) -> h.Result:
    groups = 20 if tiny else 100 if short else 1_000
    storm = 4.0 if tiny else 8.0 if short else 60.0
    ms = (20, 120) if tiny else (200, 600)  # the queue is still full when the storm ends
    result = h.Result(NAME, kind, jobs=groups * (MEMBERS + 1), ok=True)
    url = h.fresh_url(kind, workdir)
    rundir = workdir / f"s8-{kind}"
    try:
        with (
            h.producer(url) as app,
            h.fleet(url, rundir, concurrency=8, lease=LEASE, grace=5) as fleet,
        ):
            since = asyncio.run(_head(app))
            work = app.tasks["chaos.work"]
            made: list[tuple[str, str]] = []  # (group id, callback token)
            for _ in range(groups):
                cb = h.token()
                members = [work.s(h.token(), random.randint(*ms)) for _ in range(MEMBERS)]
                made.append((app.group(members, on_complete=work.s(cb)).id, cb))
            h.say(f"{NAME}/{kind}: {groups} groups enqueued; storm {storm:g}s")
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
            infos = {gid: app.get_group(gid) for gid, _ in made}
            # The members' own outcomes (a group's key defaults to its id; the callback too).
            members = {
                gid: [j for j in app.jobs(key=gid, limit=100) if j.id != gid] for gid, _ in made
            }
            statuses = {gid: app.get_job(gid) for gid, _ in made}
            woken = asyncio.run(_callback_wakeups(app, since, {gid for gid, _ in made}))
        runs = h.read_runs(fleet.marks)
        dead = set(fleet.killed)
        tokens = [cb for _, cb in made]
        incomplete = [g for g, info in infos.items() if info is None or info.completed_at is None]
        wrong = [
            g
            for g, info in infos.items()
            if info is None
            or [info.succeeded, info.failed, info.cancelled]
            != [
                sum(j.status == s for j in members[g]) for s in ("succeeded", "failed", "cancelled")
            ]
        ]
        # A member quarantined (lost its worker max_lost times, every time one we killed) is
        # failed, and counted so: unlucky, not lost.
        quarantined = sum(
            j.status == "failed" and j.lost > 0 for ms in members.values() for j in ms
        )
        if quarantined:
            result.notes.append(f"{quarantined} members quarantined by our kills (counted failed)")
        not_ok = [g for g, info in statuses.items() if info is None or info.status != "succeeded"]
        twice = [g for g, n in woken.items() if n != 1]
        result.lost = sum(1 for t in tokens if h.completed(runs, t) == 0)
        result.duplicates = h.duplicates(runs, tokens)
        result.bound = sum(
            len({t for t in tokens if t in held | h.in_flight(runs, pid, at)})
            for pid, at, held in kills
        )
        result.check(not incomplete, f"{len(incomplete)} groups not complete")
        result.check(not wrong, f"{len(wrong)} groups miscounted, e.g. {wrong[:2]}")
        members_total = sum(len(ms) for ms in members.values())
        result.check(members_total == groups * MEMBERS, f"{members_total} members found")
        result.check(not twice, f"{len(twice)} callbacks not queued exactly once: {twice[:3]}")
        result.check(not not_ok, f"{len(not_ok)} callbacks not succeeded")
        result.check(result.lost == 0, f"{result.lost} callbacks never completed a run")
        bad = h.unexplained_reruns(runs, tokens, dead)
        result.check(bad == 0, f"{bad} callback re-runs after a run in a process NOT killed")
        result.notes.append(f"{len(kills)} SIGKILLs; every callback queued once")
    finally:
        h.drop(url)
    return result


async def _head(app: duly.App) -> str:
    _, head = await (await app.backend()).events.read(None, None, 1)
    await app.aclose()
    return head
