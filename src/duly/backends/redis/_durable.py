"""Durable enqueue: ``redis://...?wait_replicas=N[&wait_timeout_ms=T]``.

Redis replicates asynchronously: an enqueue the primary acknowledged is lost if the primary
dies before a replica got it (docs/scale.md). With ``wait_replicas=N`` every enqueue (sync,
async, ``enqueue_many``, a group) sends its script calls and then ``WAIT N T`` **on the same
connection** (WAIT waits for that connection's own last write), all in one write: the call
returns once N replicas have the jobs, and raises ``DurabilityError`` (a
``BackendUnavailable``) when fewer confirmed within T ms (default 1000). The jobs *are*
stored on the primary then; they are only not known to be safe from its failure. A caller
that repeats the enqueue with the same job ids stores nothing twice.

On a cluster the calls go to the primary of the namespace's slot, on one of its connections.
A slot that moves meanwhile answers MOVED: ``BackendUnavailable``, and the next call goes to
its new primary.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from contextlib import suppress
from dataclasses import dataclass
from typing import Any, Final

from redis.exceptions import AskError, NoScriptError, ResponseError

from duly._errors import BackendUnavailable, ConfigurationError, DurabilityError
from duly.backends.redis._clients import UNAVAILABLE, BlockingConnections, Client, reply_of
from duly.backends.redis._scripts import Script, Value

__all__ = ["DEFAULT_WAIT_TIMEOUT_MS", "Durability"]

DEFAULT_WAIT_TIMEOUT_MS: Final = 1000

#: The commands of one write, and the replies they got.
Commands = list[tuple[Value, ...]]
#: What makes a cluster's durable enqueue refresh its slot map (the slot's primary died or the
#: slot moved: MOVED / ASK replies are AskErrors), then fail as ``BackendUnavailable``.
_STALE_SLOT_MAP = (*UNAVAILABLE, AskError)


def _moved(where: str, exc: BaseException) -> BaseException:
    if isinstance(exc, AskError):
        return BackendUnavailable(f"{where}: the namespace's slot moved ({exc}); try again")
    return exc


@dataclass(frozen=True, slots=True)
class Durability:
    """How many replicas must have an enqueue before it returns, and how long to wait."""

    replicas: int
    timeout_ms: int = DEFAULT_WAIT_TIMEOUT_MS

    @classmethod
    def from_params(cls, params: dict[str, str]) -> Durability | None:
        """From a URL's ``wait_replicas`` / ``wait_timeout_ms`` (None without them)."""
        if "wait_replicas" not in params:
            if "wait_timeout_ms" in params:
                raise ConfigurationError("wait_timeout_ms needs wait_replicas in the URL")
            return None
        replicas = params["wait_replicas"]
        timeout = params.get("wait_timeout_ms", str(DEFAULT_WAIT_TIMEOUT_MS))
        if not replicas.isdigit() or int(replicas) < 1:
            raise ConfigurationError(f"wait_replicas must be a whole number >= 1, got {replicas!r}")
        if not timeout.isdigit() or int(timeout) < 1:
            raise ConfigurationError(
                f"wait_timeout_ms must be a whole number >= 1, got {timeout!r}"
            )
        return cls(int(replicas), int(timeout))

    # -- the plan, shared by the async and the blocking senders -----------------------------
    def _plan(
        self, script: Script, keys: Sequence[str], chunks: list[list[Value]], where: str
    ) -> Plan:
        """The writes of one durable enqueue (each sent the replies of the previous one):
        every chunk's script call then WAIT; again, after SCRIPT LOAD, for the calls the
        server did not know the script of (a restarted or promoted primary). Returns each
        chunk's reply."""
        call: tuple[Value, ...] = ("EVALSHA", script.sha, len(keys), *keys)
        wait: tuple[Value, ...] = ("WAIT", self.replicas, self.timeout_ms)
        pending = list(range(len(chunks)))
        replies: list[Any] = [None] * len(chunks)
        head: Commands = []
        acked = 0
        for _ in range(2):  # the second time after SCRIPT LOAD; a NOSCRIPT left is an error
            if not pending:
                break
            calls: Commands = [(*call, *chunks[i]) for i in pending]
            sent = yield [*head, *calls, wait]
            sent = sent[len(head) :]
            for i, reply in zip(pending, sent, strict=False):
                replies[i] = reply
            acked = sent[-1]
            pending = [i for i in pending if isinstance(replies[i], NoScriptError)]
            head = [("SCRIPT", "LOAD", script.source)]
        for reply in replies:
            if isinstance(reply, Exception):
                raise reply
        if isinstance(acked, Exception):
            raise acked
        if int(acked) < self.replicas:
            raise DurabilityError(where, int(acked), self.replicas, self.timeout_ms)
        return replies

    # -- senders ---------------------------------------------------------------------------
    async def enqueue(
        self,
        client: Client,
        script: Script,
        keys: Sequence[str],
        chunks: list[list[Value]],
        where: str,
    ) -> list[Any]:
        """Each chunk's call of ``script`` (enqueue.lua, ``_enqueue.py`` builds the chunks),
        then WAIT, on one connection; each chunk's reply."""
        from redis.asyncio.cluster import RedisCluster

        plan = self._plan(script, keys, chunks, where)
        if not isinstance(client, RedisCluster):
            pool: Any = client.connection_pool  # redis-py leaves pools untyped
            return await _drive(plan, await pool.get_connection(), pool.release)
        try:
            node: Any = client.get_node_from_key(keys[0])  # every key is in the slot
            return await _drive(plan, node.acquire_connection(), node.release)
        except _STALE_SLOT_MAP as exc:
            with suppress(Exception):  # the next call asks the cluster where the slot is
                await client.nodes_manager.initialize()
            raise _moved(where, exc) from exc

    def enqueue_blocking(
        self,
        blocking: BlockingConnections,
        script: Script,
        keys: Sequence[str],
        chunks: list[list[Value]],
        where: str,
    ) -> list[Any]:
        """The blocking twin of ``enqueue``: on this thread's connection (on a cluster, one
        of the slot's primary's)."""
        plan = self._plan(script, keys, chunks, where)
        if blocking.topology.kind != "cluster":
            return _drive_blocking(plan, blocking.connection(), None)
        cluster: Any = blocking.cluster()  # redis-py: untyped
        try:
            pool = cluster.get_node_from_key(keys[0]).redis_connection.connection_pool
            return _drive_blocking(plan, pool.get_connection(), pool.release)
        except _STALE_SLOT_MAP as exc:
            with suppress(Exception):  # the next call asks the cluster where the slot is
                cluster.nodes_manager.initialize()
            raise _moved(where, exc) from exc


Plan = Generator[Commands, list[Any], list[Any]]


def _next(plan: Plan, sent: list[Any] | None) -> tuple[Commands | None, list[Any]]:
    """The plan's next write (sent the replies of the last one), or None and its result."""
    try:
        return (next(plan) if sent is None else plan.send(sent)), []
    except StopIteration as done:
        return None, done.value


async def _drive(plan: Plan, conn: Any, release: Any) -> list[Any]:
    """Send each write of ``plan`` on ``conn`` (then ``release`` it); the plan's result."""
    try:
        commands, replies = _next(plan, None)
        while commands is not None:
            try:
                await conn.send_packed_command(conn.pack_commands(commands))
                sent = [await reply_of(conn.read_response()) for _ in commands]
            except BaseException:
                await conn.disconnect()
                raise
            commands, replies = _next(plan, sent)
        return replies
    finally:
        released = release(conn)
        if released is not None:  # an async pool's release is a coroutine, a node's is not
            await released


def _drive_blocking(plan: Plan, conn: Any, release: Any) -> list[Any]:
    """``_drive`` on a blocking connection (``release`` None: the thread's own)."""
    try:
        commands, replies = _next(plan, None)
        while commands is not None:
            try:
                conn.send_packed_command(conn.pack_commands(commands))
                sent: list[Any] = []
                for _ in commands:
                    try:
                        sent.append(conn.read_response())
                    except ResponseError as error:  # read on: the next replies are waiting
                        sent.append(error)
            except BaseException:
                conn.disconnect()
                raise
            commands, replies = _next(plan, sent)
        return replies
    finally:
        if release is not None:
            release(conn)
