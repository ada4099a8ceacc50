"""Bulk actions on Redis (``duly.backends.bulk``): ``bulk_ids.lua`` selects the matching ids by
cursor, ``cancel_many.lua`` and ``retry_many.lua`` apply the per-job action of ``_operator.lua``
to a batch in one script."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

from duly._records import FINISHED_STATUSES, JobFilter
from duly.backends.bulk import MAX_BATCH

if TYPE_CHECKING:
    from duly.backends.redis._connection import RedisConnection
    from duly.backends.redis._scripts import Value

__all__ = ["MATCH_SCAN_BOUND", "RedisBulk"]

#: Most index entries one ``bulk_ids.lua`` call examines (its cursor goes on from there).
MATCH_SCAN_BOUND: Final = 10_000


class RedisBulk:
    """``duly.backends.bulk.BulkActions`` on Redis (``backend.bulk``)."""

    def __init__(self, conn: RedisConnection) -> None:
        self._conn = conn

    async def matching(self, where: JobFilter, cursor: str | None) -> tuple[list[str], str | None]:
        """bulk_ids.lua over the narrowest index: the key's, the finished status's, the
        running set, else every job's."""
        c, k = self._conn, self._conn.keys
        status, mode = where.status, "lex"
        if where.key is not None:
            index = k.key_index(where.key)
        elif status in FINISHED_STATUSES:
            index, status = k.status_index(status), None
        elif status == "running":
            index, mode = k.running, "scan"
        else:
            index = k.all
        args: list[Value] = [
            k.prefix,
            mode,
            MAX_BATCH,
            MATCH_SCAN_BOUND,
            status or "",
            where.task or "",
            where.queue or "",
            cursor or "",
        ]
        with c.guard("bulk_ids"):
            reply = await c.call(c.scripts.bulk_ids, (index,), args)
        after = reply[0].decode() if isinstance(reply[0], bytes) else str(reply[0])
        ids = [i.decode() if isinstance(i, bytes) else str(i) for i in reply[1:]]
        return ids, after or None

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
