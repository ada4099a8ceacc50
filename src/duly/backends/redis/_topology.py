"""Which Redis a URL names and how to reach it: one server, a Cluster, or a Sentinel-managed
primary; and the clients (async, and blocking for sync callers) for each.

``redis://``, ``rediss://``, ``unix://``: one server (redis-py's own URL syntax).
``redis+cluster://[user:password@]host:port[,host:port...]``: Redis Cluster; any reachable node
is enough to discover the rest. Every key of a namespace is hash-tagged (``keys.py``), so each
script touches one slot and runs where that slot lives; redis-py's cluster client follows
MOVED/ASK redirections and refreshes its slot map after a failover.
``redis+sentinel://[user:password@]host:port[,host:port...]/<master-name>[/<db>]``: the
sentinels are asked for the current primary of ``<master-name>``; after a failover, the
connections to the old primary close and the next ones go to the new one. The password is
the data nodes' (the sentinels are asked without one).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal
from urllib.parse import unquote, urlsplit

from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.retry import Retry as SyncRetry
from redis.sentinel import SentinelManagedConnection

from duly._errors import ConfigurationError
from duly.backends._urls import redact_url

if TYPE_CHECKING:
    from redis import ConnectionPool as SyncConnectionPool
    from redis.asyncio import Redis
    from redis.asyncio.cluster import RedisCluster
    from redis.cluster import RedisCluster as SyncRedisCluster

__all__ = ["CLUSTER_SCHEME", "SENTINEL_SCHEME", "Topology"]

CLUSTER_SCHEME: Final = "redis+cluster"
SENTINEL_SCHEME: Final = "redis+sentinel"
_CONNECT_TIMEOUT: Final = 5.0
_MAX_CONNECTIONS: Final = 64  # per cluster node
#: How the sentinels themselves are asked (a sentinel that hangs is skipped after 2 s).
_SENTINELS: Final[dict[str, Any]] = {
    "socket_connect_timeout": _CONNECT_TIMEOUT,
    "sentinel_kwargs": {"socket_connect_timeout": _CONNECT_TIMEOUT, "socket_timeout": 2.0},
}


def _retry() -> Retry:
    # Fail fast when Redis is down: the worker has its own backoff (see connection.make_client).
    return Retry(ExponentialBackoff(cap=0.2, base=0.02), 2)


def _sync_retry() -> SyncRetry:
    return SyncRetry(ExponentialBackoff(cap=0.2, base=0.02), 2)


@dataclass(frozen=True)
class Topology:
    """A parsed Redis URL: ``kind`` says how the nodes are used."""

    kind: Literal["server", "cluster", "sentinel"]
    url: str
    nodes: tuple[tuple[str, int], ...] = ()
    service: str = ""
    db: int = 0
    username: str | None = None
    password: str | None = None

    @classmethod
    def parse(cls, url: str) -> Topology:
        """The topology ``url`` names; ``ConfigurationError`` for a malformed one."""
        scheme = urlsplit(url).scheme.lower()
        if scheme not in (CLUSTER_SCHEME, SENTINEL_SCHEME):
            return cls("server", url)
        parts = urlsplit(url)
        userinfo, _, hosts = parts.netloc.rpartition("@")
        user, _, password = userinfo.partition(":")
        nodes = tuple(_node(url, host_port) for host_port in hosts.split(",") if host_port)
        if not nodes:
            raise _bad(url, "no host:port given")
        common: dict[str, Any] = {
            "nodes": nodes,
            "username": unquote(user) or None,
            "password": unquote(password) or None,
        }
        path = [unquote(p) for p in parts.path.split("/") if p]
        if scheme == CLUSTER_SCHEME:
            if path:
                raise _bad(url, "a cluster has only database 0: remove the path")
            return cls("cluster", url, **common)
        if not path or len(path) > 2:
            raise _bad(url, "expected /<master-name> or /<master-name>/<db> after the sentinels")
        if len(path) == 2 and not path[1].isdigit():
            raise _bad(url, f"database {path[1]!r} is not an integer")
        db = int(path[1]) if len(path) == 2 else 0
        return cls("sentinel", url, service=path[0], db=db, **common)

    # -- clients ---------------------------------------------------------------------------
    def cluster_client(self) -> RedisCluster:
        """The async cluster client (``kind == "cluster"``)."""
        from redis.asyncio.cluster import ClusterNode, RedisCluster

        return RedisCluster(
            startup_nodes=[ClusterNode(host, port) for host, port in self.nodes],
            username=self.username,
            password=self.password,
            decode_responses=False,
            max_connections=_MAX_CONNECTIONS,
            retry=_retry(),
            socket_connect_timeout=_CONNECT_TIMEOUT,
        )

    def sync_cluster_client(self) -> SyncRedisCluster:
        """The blocking cluster client (thread-safe: a pool per node)."""
        from redis.cluster import ClusterNode, RedisCluster

        return RedisCluster(
            startup_nodes=[
                ClusterNode(host, port)  # type: ignore[no-untyped-call]
                for host, port in self.nodes
            ],
            username=self.username,
            password=self.password,
            decode_responses=False,
            retry=_sync_retry(),
            socket_connect_timeout=_CONNECT_TIMEOUT,
        )

    def sentinel_client(self) -> Redis:
        """An async client of the primary the sentinels name (``kind == "sentinel"``)."""
        from redis.asyncio import Redis
        from redis.asyncio.sentinel import Sentinel

        sentinel = Sentinel(list(self.nodes), **_SENTINELS)  # type: ignore[no-untyped-call, unused-ignore]
        client: Redis = sentinel.master_for(
            self.service, redis_class=Redis, retry=_retry(), **self._primary_options()
        )
        return client

    def sync_sentinel_pool(self) -> SyncConnectionPool:
        """A blocking connection pool of the primary the sentinels name (only its
        ``connection_class`` and ``connection_kwargs`` are used: see ``BlockingConnections``)."""
        from redis.sentinel import Sentinel, SentinelConnectionPool

        sentinel = Sentinel(list(self.nodes), **_SENTINELS)  # type: ignore[no-untyped-call, unused-ignore]
        return SentinelConnectionPool(  # type: ignore[no-untyped-call]
            self.service,
            sentinel,
            connection_class=_PrimaryConnection,
            retry=_sync_retry(),
            **self._primary_options(),
        )

    def _primary_options(self) -> dict[str, Any]:
        return {
            "db": self.db,
            "username": self.username,
            "password": self.password,
            "decode_responses": False,
            "socket_connect_timeout": _CONNECT_TIMEOUT,
        }


class _PrimaryConnection(SentinelManagedConnection):
    """A blocking connection to the primary the sentinels name, asking them on every
    (re)connect. redis-py's own connects only in ``connect()``, which a pool's checkout calls
    but ``send_command`` does not: a connection used outside a pool would go to
    127.0.0.1:6379 at first and to the old primary after a failover."""

    _asking = False

    def connect_check_health(
        self, check_health: bool = True, retry_socket_connect: bool = True
    ) -> None:
        if self._sock is not None or self._asking:
            super().connect_check_health(check_health, retry_socket_connect)
            return
        self._asking = True  # connect() asks the sentinels, then comes back here to connect
        try:
            self.connect()  # type: ignore[no-untyped-call]
        finally:
            self._asking = False


def _bad(url: str, problem: str) -> ConfigurationError:
    expected = (
        "expected redis+cluster://host:port[,host:port...] or "
        "redis+sentinel://host:port[,host:port...]/<master-name>[/<db>]"
    )
    return ConfigurationError(f"invalid URL {redact_url(url)!r}: {problem} ({expected})")


def _node(url: str, host_port: str) -> tuple[str, int]:
    if host_port.startswith("["):  # [v6]:port
        host, _, after = host_port[1:].partition("]")
        port = after[1:] if after.startswith(":") else ""
    else:
        host, _, port = host_port.rpartition(":") if ":" in host_port else (host_port, "", "")
    if not port:
        raise _bad(url, f"{host_port!r} has no port")
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise _bad(url, f"port {port!r} is not a number from 1 to 65535")
    if not host:
        raise _bad(url, f"{host_port!r} has no host")
    return host, int(port)
