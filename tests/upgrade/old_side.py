"""Run by the upgrade test under the last release (its own venv): leave jobs of every kind in
the backend, as a running system would at the moment it is upgraded, and print their ids.

``python old_side.py URL NAMESPACE MARKS``. Uses only the API of duly 0.1.0 (and its backend
protocol, to leave a job running under a worker that is gone). Prints one JSON object:
``{"duly": <version>, "from": <its duly/__init__.py>, <kind>: <job id>, ...}``.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

from duly.scheduler.periodic import Scheduler  # the old release's module
from upgrade_tasks import PERIOD, make_app

import duly


async def main(url: str, namespace: str, marks: Path) -> dict[str, str]:
    app = make_app(url, namespace, marks)
    t = app.tasks
    ids: dict[str, str] = {"duly": duly.__version__, "from": duly.__file__}

    # retrying: a real worker of this release runs the first attempt, which fails.
    ids["retrying"] = (await t["up.flaky"].enqueue_async(5)).id
    worker = app.worker(queues=["prep"], scheduler=False, install_signal_handlers=False, lease=5)
    running = asyncio.create_task(worker.run())
    deadline = time.monotonic() + 20
    while not (marks / "flaky-started").exists():
        assert time.monotonic() < deadline, "the old worker did not start the flaky job"
        await asyncio.sleep(0.02)
    worker.stop()  # once the running attempt has reported its failure
    await running

    ids["queued"] = (await t["up.plain"].enqueue_async(1)).id
    ids["queued_keyed"] = (await t["up.plain"].options(priority=5, key="k").enqueue_async(3)).id
    ids["delayed"] = (await t["up.plain"].options(delay=2).enqueue_async(2)).id
    ids["unique"] = (await t["up.unique"].enqueue_async(7)).id
    again = await t["up.unique"].enqueue_async(7)
    assert again.deduplicated and again.id == ids["unique"]
    watch = t["up.shipped"]
    ids["watch"] = (await watch.start_async(order=1)).id
    ids["watch_later"] = (await watch.options(delay=1).start_async(order=2)).id

    # mutex-parked: a worker that is gone claimed the holder (its lease lapses in a second)
    # and the second job of the mutex, which parked behind it.
    ids["running"] = (await t["up.hold"].enqueue_async(1)).id
    ids["parked"] = (await t["up.gated"].enqueue_async(2)).id
    backend = await app.backend()
    now = app.clock.now()
    claimed = await backend.claim("old-worker-gone", ["gate"], 2, now, now + 1.0)
    assert [job.id for job in claimed] == [ids["running"]], claimed

    # periodic: the scheduler of this release enqueues the tick that is due now.
    tick = PERIOD * (now // PERIOD)
    ticking = make_app(url, namespace, marks, clock=duly.ManualClock(tick + 0.5))
    assert await Scheduler(ticking).run_once(await ticking.backend()) == 1
    [tick_job] = await ticking.jobs_async(key="periodic:up.tick")
    ids["periodic"] = tick_job.id
    await ticking.aclose()

    states = {}
    for kind, job_id in ids.items():
        if kind not in ("duly", "from"):
            job = await app.get_job_async(job_id)
            states[kind] = None if job is None else job.status
    await app.aclose()
    expected = {
        "retrying": "retrying",
        "queued": "queued",
        "queued_keyed": "queued",
        "delayed": "scheduled",
        "unique": "queued",
        "watch": "queued",
        "watch_later": "scheduled",
        "running": "running",
        "parked": "queued",
        "periodic": "queued",
    }
    assert states == expected, states
    return ids


if __name__ == "__main__":
    url, namespace, marks = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    print(json.dumps(asyncio.run(main(url, namespace, marks))))
