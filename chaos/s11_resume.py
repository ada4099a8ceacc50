"""11. Resume: one checkpointed job of 1,000,000 items across 3 SIGKILLs and 2 graceful restarts.

The job (``chaos.resumable``) works in batches of ``BATCH`` items and calls
``duly.current_job().checkpoint(next_item)`` after each (kept in memory: the worker stores the
latest with its heartbeat, at most once per ``PROGRESS_INTERVAL`` = 1 s) and marks each batch
outside duly. Its worker is SIGKILLed three times and SIGTERMed twice (a deploy: the job sees
``job.stopping``, checkpoints the item it stopped after and raises ``duly.Interrupted``).

Per interruption, re-done items = the furthest item the interrupted run marked - the item the
next run resumed from (its ``job.cursor``). Bound: one checkpoint interval — the items done
between two durable writes (the run's measured rate x (1 s + ``WRITE_SLACK``)) plus one batch —
for a SIGKILL; nothing for a graceful restart. The job must end ``succeeded`` with every item
done, its attempts charged only by the kills.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from chaos import harness as h

NAME = "11 resume, 1M-item job"
ITEMS, BATCH, PAUSE_MS = 1_000_000, 1_000, 20.0  # ~50,000 items/s: ~20 s of work
SCHEDULE = ("kill", "term", "kill", "term", "kill")
#: The run time of each worker before it is interrupted (seconds after its run starts).
RUN_FOR = 2.5
#: The write of a heartbeat and the loop's look, on top of PROGRESS_INTERVAL (1 s).
WRITE_SLACK = 0.25


def run(kind: str, workdir: Path, short: bool = False) -> h.Result:
    items = ITEMS // 5 if short else ITEMS
    result = h.Result(NAME if not short else "11 resume, 200k-item job", kind, jobs=1, ok=True)
    url = h.fresh_url(kind, workdir)
    rundir = workdir / f"s11-{kind}"
    saved = os.environ.get("CHAOS_MAX_LOST")
    os.environ["CHAOS_MAX_LOST"] = str(len(SCHEDULE) + 1)  # the kills must not quarantine it
    try:
        with (
            h.producer(url, max_lost=len(SCHEDULE) + 1) as app,
            h.fleet(url, rundir, concurrency=1, lease=2.0, grace=30.0) as fleet,
        ):
            tok = h.token()
            job = app.tasks["chaos.resumable"].enqueue(tok, items, BATCH, PAUSE_MS)
            pid = fleet.spawn()
            for n, action in enumerate(SCHEDULE, 1):
                runs = _wait_run(fleet.marks, tok, n, 60)
                result.check(runs is not None, f"run {n} did not start within 60 s")
                if runs is None:
                    break
                time.sleep(RUN_FOR)
                h.say(f"{NAME}/{kind}: interruption {n}: {action} worker {pid}")
                if action == "kill":
                    fleet.kill(pid)
                    pid = fleet.spawn()
                else:
                    fleet.term([pid])
                    new = fleet.spawn()
                    took = fleet.wait_exit([pid], 40)[pid]
                    result.check(took is not None, f"worker {pid} still alive 40 s after SIGTERM")
                    code = fleet.exits.get(pid, (None,))[0]
                    result.check(code == 0, f"worker {pid} exited with {code} after SIGTERM")
                    pid = new
            deadline = time.monotonic() + 180
            while time.monotonic() < deadline:
                info = app.get_job(job.id)
                if info is not None and info.finished:
                    break
                time.sleep(0.2)
            fleet.stop(app=app)
            info = app.get_job(job.id)
        result.check(info is not None and info.status == "succeeded", f"the job ended {info}")
        if info is not None:
            result.check(info.result == items, f"result {info.result} != {items}")
            kills = SCHEDULE.count("kill")
            result.check(
                (info.attempts, info.lost) == (kills + 1, kills),
                f"attempts/lost {info.attempts}/{info.lost}: the hand-backs must not be charged",
            )
        _judge(result, fleet.marks, tok, items)
    finally:
        if saved is None:
            os.environ.pop("CHAOS_MAX_LOST", None)
        else:
            os.environ["CHAOS_MAX_LOST"] = saved
        h.drop(url)
    return result


def _marks(marks: Path, tok: str) -> list[tuple[float, str, int, int]]:
    """(time, kind R|B, item, pid) of this job's marks, in time order."""
    out = []
    for path in marks.glob("*.marks"):
        pid = int(path.stem)
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) != 3 or parts[0] not in ("R", "B"):
                continue
            name, _, item = parts[1].partition(":")
            if name == tok:
                out.append((float(parts[2]), parts[0], int(item), pid))
    return sorted(out)


def _wait_run(marks: Path, tok: str, n: int, timeout: float) -> int | None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        runs = sum(1 for _, kind, _, _ in _marks(marks, tok) if kind == "R")
        if runs >= n:
            return runs
        time.sleep(0.05)
    return None


def _judge(result: h.Result, marks: Path, tok: str, items: int) -> None:
    """Items re-done per interruption, against one checkpoint interval each."""
    runs: list[dict[str, object]] = []
    for at, kind, item, pid in _marks(marks, tok):
        if kind == "R":
            runs.append({"pid": pid, "start": item, "batches": []})
        elif runs:
            batches = runs[-1]["batches"]
            assert isinstance(batches, list)
            batches.append((at, item))
    result.check(len(runs) == len(SCHEDULE) + 1, f"{len(runs)} runs, not {len(SCHEDULE) + 1}")
    redone, bounds, rates = [], [], []
    for n, (action, before, after) in enumerate(zip(SCHEDULE, runs, runs[1:], strict=False), 1):
        batches = before["batches"]
        assert isinstance(batches, list) and isinstance(before["start"], int)
        reached = batches[-1][1] if batches else before["start"]
        resumed = after["start"]
        assert isinstance(resumed, int)
        rate = _rate(batches)
        rates.append(rate)
        bound = 0 if action == "term" else round(rate * (1.0 + WRITE_SLACK)) + BATCH
        again = reached - resumed
        redone.append(again)
        bounds.append(bound)
        result.check(
            -BATCH <= again <= bound,
            f"interruption {n} ({action}): {again} items re-done > bound {bound}",
        )
    done = runs[-1]["batches"] if runs else []
    assert isinstance(done, list)
    result.check(bool(done) and done[-1][1] == items, "the last run did not reach the last item")
    result.duplicates = max(redone, default=0)  # the worst interruption, against its bound
    result.bound = max(bounds) if bounds else 0
    figures = ", ".join(
        f"{a} {r:,}/{b:,}" for a, r, b in zip(SCHEDULE, redone, bounds, strict=False)
    )
    rate = sum(rates) / len(rates) if rates else 0.0
    result.notes.append(
        f"items re-done/bound per interruption: {figures} (~{rate:,.0f} items/s; "
        f"checkpoint every {BATCH:,} items, stored with the heartbeat <= 1/s)"
    )


def _rate(batches: list[tuple[float, int]]) -> float:
    """Items per second of one run, from its batch marks."""
    if len(batches) < 2:
        return float(BATCH) / (PAUSE_MS / 1000)
    (t0, i0), (t1, i1) = batches[0], batches[-1]
    return (i1 - i0) / (t1 - t0) if t1 > t0 else 0.0
