"""One Redis backend's connection: what every seam module is given.

``RedisConnection`` owns the async client (made on first use, see ``_clients.py``), the blocking
callers' connections, the scripts and the auto-pipeline they are sent through, the keyspace and
the wake-up listener; ``guard`` turns an unreachable Redis into ``BackendUnavailable``. The
backend facade (``__init__.py``) owns one and passes it to the seam functions; nothing here
knows what a script does.
"""

from __future__ import annotations

from collections.abc import Awaitable, Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any, Final

from redis.asyncio.cluster import RedisCluster

from duly.backends._urls import redact_url
from duly.backends.redis._clients import (
    UNAVAILABLE,
    AutoPipeline,
    BlockingConnections,
    Client,
    guard,
    make_client,
)
from duly.backends.redis._durable import Durability
from duly.backends.redis._keys import Keyspace
from duly.backends.redis._scripts import Script, Scripts, Value
from duly.backends.redis._topology import Topology
from duly.backends.redis._wake import Wake

__all__ = ["RedisConnection", "drop", "ping"]

_DROP_BATCH: Final = 1000
#: SCAN's COUNT hint while dropping: the namespace's keys are found among every key of the
#: database, so a small hint means one round trip per thousand keys of *other* namespaces.
_DROP_SCAN_COUNT: Final = 10_000


class RedisConnection:
    """The client, scripts and keys of one backend instance (one event loop)."""

    def __init__(self, url: str, namespace: str, durability: Durability | None) -> None:
        self.url = url
        self.namespace = namespace
        #: ``?wait_replicas=``: every enqueue waits for that many replicas (``_durable.py``).
        self.durability = durability
        self.keys = Keyspace(namespace)
        self.topology = Topology.parse(url)
        self.safe_url = redact_url(url)
        self.scripts = Scripts()
        self.blocking = BlockingConnections(self.topology)
        self.wake = Wake(self.keys.wake, self.safe_url)
        #: Whether the scripts were registered on this client (``SCRIPT LOAD`` at open).
        self.loaded = False
        self._client: Client | None = None
        self._pipeline = AutoPipeline()

    @property
    def client(self) -> Client:
        """The async client, made on first use (``close_client`` drops it)."""
        if self._client is None:
            self._client = make_client(self.topology)
        return self._client

    @contextmanager
    def guard(self, doing: str) -> Iterator[None]:
        """``BackendUnavailable`` naming this backend's (safe) URL and ``doing``."""
        with guard(self.safe_url, doing):
            yield

    def call(self, script: Script, keys: Sequence[str], args: Sequence[Value]) -> Awaitable[Any]:
        """One script call: auto-pipelined on one server; on a cluster, sent by the cluster
        client to the node of its keys' slot (it follows MOVED/ASK)."""
        client = self.client
        if isinstance(client, RedisCluster):
            return script(client, keys, args)
        return self._pipeline.call(client, script, keys, args)

    async def load_scripts(self) -> None:
        """Register every script once per client."""
        if not self.loaded:
            await self.scripts.load(self.client)
            self.loaded = True

    async def close_client(self) -> None:
        """Close the async client (the next call makes a new one)."""
        client, self._client = self._client, None
        self.loaded = False
        if client is not None:
            with suppress(*UNAVAILABLE):
                await client.aclose()


async def ping(conn: RedisConnection) -> None:
    """PING, as ``BackendUnavailable`` when Redis cannot be reached."""
    with conn.guard("ping"):
        await conn.client.ping()


async def drop(conn: RedisConnection) -> None:
    """Delete every key of the namespace (SCAN by its pattern, UNLINK in batches)."""
    with conn.guard("drop"):
        client = conn.client
        batch: list[bytes] = []
        async for key in client.scan_iter(match=conn.keys.pattern, count=_DROP_SCAN_COUNT):
            batch.append(key)
            if len(batch) >= _DROP_BATCH:
                await client.unlink(*batch)
                batch.clear()
        if batch:
            await client.unlink(*batch)
