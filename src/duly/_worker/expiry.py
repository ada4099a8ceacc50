"""Jobs a claim found expired (``expires=``): the claim ended them ``cancelled`` with a
``JobExpired`` error in its own atomic step and returned them after the jobs it started; here
they are told (a WARNING line, the ``expired`` hook, which counts them) and left out."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from duly._hooks import settle
from duly._records import JobRecord

if TYPE_CHECKING:
    from duly._app import App

__all__ = ["runnable"]

log = logging.getLogger("duly.worker")


async def runnable(app: App, records: list[JobRecord]) -> list[JobRecord]:
    """The jobs ``records`` started (status ``running``); the expired ones (``cancelled``)
    are reported. Only a running record is this worker's to run: anything else is dropped."""
    started = [r for r in records if r.status == "running"]
    if len(started) == len(records):
        return records
    hooks = app.hooks
    pending = []
    for record in records:
        if record.status == "cancelled":
            log.warning(
                "job %s (%s, queue %s) expired before it started: cancelled, never run",
                record.id,
                record.task,
                record.queue,
            )
            if hooks.watching("expired"):
                pending.extend(hooks.call("expired", record))
    if pending:
        await settle("expired", pending)
    return started
