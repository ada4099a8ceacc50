"""Progress and checkpoints on Redis (``duly.backends.progress``): ``heartbeat.lua`` stores the
runs' reports (``lua/_progress.lua``) in the same call as the leases."""

from __future__ import annotations

from collections.abc import Sequence

from duly._records import ProgressReport
from duly.backends.redis._connection import RedisConnection
from duly.backends.redis._scripts import Value

__all__ = ["RedisProgress"]


class RedisProgress:
    """``duly.backends.progress.ProgressStore`` on Redis (``backend.progress``)."""

    def __init__(self, conn: RedisConnection) -> None:
        self._conn = conn

    async def heartbeat(
        self,
        worker: str,
        job_ids: Sequence[str],
        now: float,
        lease_until: float,
        reports: Sequence[ProgressReport],
    ) -> list[str]:
        """One heartbeat.lua call: the reports, then the leases (see its header)."""
        conn, k = self._conn, self._conn.keys
        args: list[Value] = [k.prefix, worker, float(now), float(lease_until), len(reports)]
        for r in reports:
            args += (r.job_id, r.progress or b"", r.cursor or b"")
        with conn.guard("heartbeat"):
            gone: list[bytes] = await conn.call(
                conn.scripts.heartbeat, (k.running, k.workers), [*args, *job_ids]
            )
        return [job_id.decode() for job_id in gone]
