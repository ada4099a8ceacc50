"""Paused queues on Redis (``duly.backends.pausing``): the ``paused`` hash of the namespace
(see keys.py), queue -> paused_at.

``claim.lua`` and the hand-off in ``enqueue.lua`` read it in their own script (``_pausing.lua``):
Redis runs scripts one at a time, so every claim or hand-off after the HSETNX of ``pause`` sees
it. ``resume.lua`` removes the entry and wakes the queue's waiting workers in one script.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from duly.backends.redis._connection import RedisConnection

__all__ = ["RedisPausing"]


class RedisPausing:
    """``duly.backends.pausing.PauseStore`` on Redis (``backend.pausing``)."""

    def __init__(self, conn: RedisConnection) -> None:
        self._conn = conn

    async def pause(self, queue: str, now: float) -> bool:
        """HSETNX the queue; False if it was paused already."""
        c = self._conn
        with c.guard("pause"):
            return bool(await c.client.hsetnx(c.keys.paused, queue, repr(float(now))))

    async def resume(self, queue: str) -> bool:
        """resume.lua: remove the entry and publish the queue on the wake channel."""
        c = self._conn
        k = c.keys
        with c.guard("resume"):
            return bool(await c.call(c.scripts.resume, (k.paused,), [k.prefix, queue, k.wake]))

    async def paused(self) -> dict[str, float]:
        """The paused queues and when each was paused."""
        c = self._conn
        with c.guard("paused"):
            raw = cast(dict[Any, Any], await c.client.hgetall(c.keys.paused))
        return {_text(queue): float(at) for queue, at in raw.items()}


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
