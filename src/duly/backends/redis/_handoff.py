"""The worker side of the direct hand-off (lua/_handoff.lua): an idle worker process blocks in
``BLPOP`` on its own inbox, on a connection of its own (a blocking command must not hold a
pooled connection), while the namespace's wake-ups (``wake.py``) still cover every job that is
not handed off (promoted, retried, unparked, or enqueued while no worker was idle).

Stopping a wait early (a wake-up, or the worker stopping) unblocks the ``BLPOP`` with
``CLIENT UNBLOCK`` from a pooled connection and then reads its reply anyway: a row that Redis
popped for this worker is always read, never dropped with a cancelled command.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from contextlib import suppress
from typing import TYPE_CHECKING, Any, Final, cast

from redis.asyncio import Redis
from redis.asyncio.connection import AbstractConnection

from duly._records import JobRecord
from duly.backends.redis import _codec
from duly.backends.redis._claim import claim_rows, claimed_records

if TYPE_CHECKING:
    from duly.backends.redis._connection import RedisConnection

__all__ = ["Inbox", "RedisHandoff"]


def _retrieve(future: asyncio.Future[Any]) -> None:
    """Consume a background future's outcome (no "exception never retrieved" warning)."""
    if not future.cancelled():
        future.exception()


#: Seconds between two ``CLIENT UNBLOCK`` tries while the ``BLPOP`` has not reached Redis yet.
_UNBLOCK_RETRY: Final = 0.002


class Inbox:
    """One worker's inbox key and the connection its ``BLPOP`` waits on."""

    def __init__(self, key: str) -> None:
        self.key = key
        self._conn: AbstractConnection | None = None
        self._client_id = 0

    async def wait(
        self, client: Redis, others: list[Awaitable[Any]], timeout: float
    ) -> bytes | None:
        """The next row pushed to the inbox within ``timeout`` seconds, or None when it timed
        out or one of ``others`` finished first (they are cancelled when this returns).

        The reply is read in this very coroutine, so a handed row reaches the caller in the
        loop turn it arrives in; ``others`` only unblock the ``BLPOP`` when they finish."""
        conn = await self._connection(client)
        watchers = [asyncio.ensure_future(other) for other in others]
        unblocking: list[asyncio.Task[None]] = []

        def unblock(_: object) -> None:
            if not unblocking:
                unblocking.append(asyncio.ensure_future(self._unblock(client)))

        for watcher in watchers:
            watcher.add_done_callback(unblock)
        try:
            await conn.send_command("BLPOP", self.key, max(timeout, 0.001))
            reply: list[bytes] | None = await conn.read_response()
        except BaseException:
            await self.close()  # its state is unknown: the next wait connects again
            raise
        finally:
            for future in (*watchers, *unblocking):
                future.remove_done_callback(unblock)
                future.cancel()  # they end in the background: the row goes out now
                future.add_done_callback(_retrieve)
        return None if reply is None else reply[1]

    async def _unblock(self, client: Redis) -> None:
        """Unblock the ``BLPOP`` (as if it timed out); 0 means it is not blocked: served
        already (its reply is on the way, and this task is cancelled then) or not yet."""
        while not await client.client_unblock(self._client_id):
            await asyncio.sleep(_UNBLOCK_RETRY)

    async def _connection(self, client: Redis) -> AbstractConnection:
        if self._conn is None:
            pool: Any = client.connection_pool  # redis-py leaves pools untyped
            conn: AbstractConnection = pool.make_connection()
            try:
                await conn.connect()  # type: ignore[no-untyped-call]
                await conn.send_command("CLIENT", "ID")
                self._client_id = int(await conn.read_response())
            except BaseException:
                with suppress(Exception):
                    await conn.disconnect()
                raise
            self._conn = conn
        return self._conn

    async def close(self) -> None:
        """Close the inbox's connection (the next wait makes a new one)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            with suppress(Exception):
                await conn.disconnect()


class RedisHandoff:
    """``duly.backends.handoff.Handoff`` on one Redis server (``backend.handoff``; None on a
    cluster or Sentinel, whose workers only wake)."""

    def __init__(self, conn: RedisConnection) -> None:
        self._conn = conn
        self._inboxes: dict[str, Inbox] = {}

    async def claim_idle(
        self,
        worker: str,
        queues: Sequence[str],
        limit: int,
        now: float,
        lease_until: float,
        idle_for: float,
        withdraw: bool = True,
    ) -> list[JobRecord]:
        """claim.lua with the idle registration (see the protocol)."""
        if not queues:
            return []
        c = self._conn
        idle = (idle_for, float(lease_until) + idle_for, withdraw)
        with c.guard("claim"):
            handed, rows = await claim_rows(
                c, worker, queues, max(limit, 0), now, lease_until, idle
            )
            claimed = await claimed_records(c, rows, worker, now, lease_until)
        return [_codec.handed(row, worker) for row in handed] + claimed

    async def wait(
        self, worker: str, queues: Sequence[str], timeout: float, stop: asyncio.Event
    ) -> list[JobRecord]:
        """BLPOP on the worker's inbox, cut short by a wake-up or ``stop``."""
        if stop.is_set():
            return []
        c = self._conn
        client = c.client
        inbox = self._inboxes.get(worker)
        if inbox is None:
            inbox = self._inboxes[worker] = Inbox(c.keys.inbox(worker))
        with c.guard("wait_for_work"):
            if await c.wake.woken(client, queues):
                return []
            wake = c.wake.wait(client, queues, timeout)
            # one server (only then is there a hand-off): a plain client, not a cluster's
            row = await inbox.wait(cast(Redis, client), [wake, stop.wait()], timeout)
        return [] if row is None else [_codec.handed(row, worker)]

    async def withdraw(self, worker: str, queues: Sequence[str]) -> list[JobRecord]:
        """claim.lua with limit 0: withdraw the registration, take what was handed."""
        inbox = self._inboxes.pop(worker, None)
        if inbox is not None:
            await inbox.close()
        if not queues:
            return []
        c = self._conn
        with c.guard("withdraw"):
            handed, _ = await claim_rows(c, worker, queues, 0, 0.0, 0.0, (0.001, 0.0, True))
        return [_codec.handed(row, worker) for row in handed]

    async def close(self) -> None:
        """Close every inbox's connection."""
        inboxes, self._inboxes = list(self._inboxes.values()), {}
        for inbox in inboxes:
            await inbox.close()
