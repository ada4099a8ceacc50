"""Bulk actions on Redis (``duly.backends.bulk``): ``cancel_many.lua`` and ``retry_many.lua``
apply the per-job action of ``_operator.lua`` to a batch in one script."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from duly.backends.bulk import MAX_BATCH

if TYPE_CHECKING:
    from duly.backends.redis._connection import RedisConnection

__all__ = ["RedisBulk"]


class RedisBulk:
    """``duly.backends.bulk.BulkActions`` on Redis (``backend.bulk``)."""

    def __init__(self, conn: RedisConnection) -> None:
        self._conn = conn

    async def cancel(
        self, job_ids: Sequence[str], status: str, now: float, expire_at: float
    ) -> int:
        """cancel_many.lua over the batch."""
        if not job_ids:
            return 0
        c, k = self._conn, self._conn.keys
        with c.guard("cancel_many"):
            n = await c.call(
                c.scripts.cancel_many,
                (k.running, k.due, k.expiry, k.queue_counts, k.unique),
                [k.prefix, float(now), float(expire_at), status, k.wake, *job_ids[:MAX_BATCH]],
            )
        return int(n)

    async def retry(self, job_ids: Sequence[str], status: str, now: float) -> int:
        """retry_many.lua over the batch."""
        if not job_ids:
            return 0
        c, k = self._conn, self._conn.keys
        with c.guard("retry_many"):
            n = await c.call(
                c.scripts.retry_many,
                (k.expiry, k.unique),
                [k.prefix, float(now), status, k.wake, *job_ids[:MAX_BATCH]],
            )
        return int(n)
