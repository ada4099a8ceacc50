"""``duly._worker.leases``: a supervisor renews the leases of the jobs its live children hold.

The keeper runs as in a supervisor (a thread with a loop and an App of its own); the child's
end is a ``LeaseShare`` on the pipe it watches. The processes themselves (a task holding the
GIL, a dead child, a dead supervisor) are in ``tests/e2e/test_e2e_leases.py``.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine
from typing import Any

import duly
from duly._worker.leases import LeaseKeeper, LeaseShare
from duly.backends.base import Backend

CHILD = "w-child"


def _run(app: duly.App, call: Callable[[Backend, float], Coroutine[Any, Any, Any]]) -> Any:
    async def main() -> Any:
        try:
            return await call(await app.backend(), app.clock.now())
        finally:
            await app.aclose()

    return asyncio.run(main())


def test_the_keeper_renews_a_live_childs_leases_until_bye_or_exit(
    make_app: Callable[..., duly.App], backend_kind: str, wait: Callable[..., Any]
) -> None:
    app, keeper_app = make_app(), make_app()

    @app.task(name="leases.noop")
    def noop() -> None: ...

    job = noop.enqueue()

    async def claim(backend: Backend, now: float) -> list[str]:
        await backend.register_worker(CHILD, now, {})
        return [r.id for r in await backend.claim(CHILD, ["default"], 1, now, now + 2.0)]

    assert _run(app, claim) == [job.id]

    def lease_until() -> float:
        record = _run(app, lambda backend, _now: backend.get_job(job.id))
        assert record.worker == CHILD and record.lease_until is not None
        return float(record.lease_until)

    def registered() -> bool:
        return CHILD in {w.id for w in app.workers()}

    read, write = os.pipe()
    share = LeaseShare(write)
    keeper = LeaseKeeper(keeper_app.backend, keeper_app.aclose, keeper_app.clock, lease=2.0)
    keeper.start()
    try:
        keeper.watch(4242, read)
        first = lease_until()
        share.add(CHILD, [job.id])
        wait(lambda: lease_until() > first)

        # The child unregisters; a renewal on its way may register it again (SQLite, Redis):
        # its "bye" makes the keeper unregister it once more, after its last renewal.
        _run(app, lambda backend, _now: backend.unregister_worker(CHILD))
        if backend_kind != "postgres":  # there a heartbeat does not register a worker
            wait(registered)
        share.bye(CHILD)
        wait(lambda: not registered())

        # The child exits: the keeper closes its end of the pipe and renews nothing for it.
        keeper.forget(4242)

        def pipe_closed() -> bool:
            share.held(CHILD, [job.id])
            return share.fd is None

        wait(pipe_closed)
    finally:
        keeper.stop()
        if share.fd is not None:
            os.close(share.fd)
