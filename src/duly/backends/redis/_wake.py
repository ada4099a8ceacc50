"""Waiting for work on Redis: one pub/sub connection per backend, subscribed to the namespace's
wake channel (scripts publish a queue name when a job may be claimable in it), and a listener
task that wakes the waiters of that queue. Waiting never holds a pooled connection.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from contextlib import suppress

from redis.asyncio.client import PubSub

from duly.backends.redis._clients import Client, guard

__all__ = ["Wake"]


class Wake:
    """The wake-ups of one namespace's ``channel``, and who waits for which queues."""

    def __init__(self, channel: str, safe_url: str) -> None:
        self.channel = channel
        self._safe_url = safe_url
        self._pubsub: PubSub | None = None
        self._listener: asyncio.Task[None] | None = None
        self._pending: set[str] = set()
        self._waiters: list[tuple[frozenset[str], asyncio.Future[None]]] = []

    async def wait(self, client: Client, queues: Sequence[str], timeout: float) -> None:
        """Return when one of ``queues`` is woken (now, if it was since the last wait) or after
        ``timeout`` seconds; subscribes on ``client`` first when not listening."""
        if await self.woken(client, queues):
            return
        wanted = frozenset(queues)
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (wanted, future)
        self._waiters.append(entry)
        try:
            async with asyncio.timeout(max(timeout, 0.0)):
                await future
        except TimeoutError:
            pass
        finally:
            self._waiters.remove(entry)

    async def woken(self, client: Client, queues: Sequence[str]) -> bool:
        """Whether one of ``queues`` was woken since the last wait (forgetting it if so);
        subscribes on ``client`` first when not listening."""
        wanted = frozenset(queues)
        await self._ensure_listener(client)
        if self._pending & wanted:
            self._pending -= wanted
            return True
        return False

    async def _ensure_listener(self, client: Client) -> None:
        if self._listener is not None and not self._listener.done():
            return
        await self.stop()
        with guard(self._safe_url, "subscribe"):
            pubsub = client.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.subscribe(self.channel)
            except BaseException:
                with suppress(Exception):
                    await pubsub.aclose()  # type: ignore[no-untyped-call, unused-ignore]
                raise
        self._pubsub = pubsub
        self._listener = asyncio.create_task(self._listen(pubsub), name="duly-redis-wake")

    async def _listen(self, pubsub: PubSub) -> None:
        """Route wake messages to waiters; a message nobody waits for is kept as pending."""
        try:
            while True:
                message = await pubsub.get_message(timeout=None)
                if message is None or message.get("type") != "message":
                    continue
                data = message["data"]
                queue = data.decode() if isinstance(data, bytes) else str(data)
                woke = False
                for wanted, future in self._waiters:
                    if queue in wanted and not future.done():
                        future.set_result(None)
                        woke = True
                if not woke:
                    self._pending.add(queue)
        except asyncio.CancelledError:
            raise
        except Exception:
            # Connection lost (or a bug): wake everyone, so the worker claims (and meets the
            # error there); the next wait subscribes again.
            for _, future in self._waiters:
                if not future.done():
                    future.set_result(None)

    async def stop(self) -> None:
        """Stop listening and close the pub/sub connection (the next wait subscribes again)."""
        listener, self._listener = self._listener, None
        pubsub, self._pubsub = self._pubsub, None
        if listener is not None and not listener.done():
            listener.cancel()
            with suppress(asyncio.CancelledError, Exception):
                await listener
        if pubsub is not None:
            with suppress(Exception):
                await pubsub.aclose()  # type: ignore[no-untyped-call, unused-ignore]
