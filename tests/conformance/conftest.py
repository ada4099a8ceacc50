"""The backend contract runs on every backend: fixtures, and a runner for ``async def`` tests.

Every test that takes ``backend`` or ``make_backend`` runs once per backend, with ids
``sqlite``, ``redis``, ``redis-cluster`` (the Redis backend on a local 3-master Redis Cluster
started once per test process) and ``postgres`` (``pytest -k redis`` selects both Redis
kinds), each on its own
namespace (a SQLite file in ``tmp_path``, a Redis key prefix, a PostgreSQL schema), so the suite
can run in parallel.

A backend instance belongs to one event loop. Each test gets its own loop (``aio``, an
``asyncio.Runner``); the ``backend`` fixture opens the backend in that loop, an ``async def``
test runs in it (see ``pytest_pyfunc_call`` below), and the fixture drops and closes the
backend in it afterwards. Extra instances for races come from ``make_backend`` and are opened in
whatever loop (thread) uses them.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Iterator
from pathlib import Path
from uuid import uuid4

import pytest
from contract import KINDS, BackendFactory

from duly.backends.base import Backend


def _hex() -> str:
    return uuid4().hex[:12]


@pytest.fixture
def sqlite_factory(tmp_path: Path) -> BackendFactory:
    from duly.backends.sqlite import SqliteBackend

    return BackendFactory(
        "sqlite",
        lambda name: SqliteBackend(f"sqlite:///{tmp_path}/{name}.db"),
        "duly",
        lambda: f"t{_hex()}",
    )


def _redis_factory(kind: str, url: str) -> BackendFactory:
    from duly.backends.redis import RedisBackend

    return BackendFactory(
        kind, lambda name: RedisBackend(url, namespace=name), f"t{_hex()}", lambda: f"t{_hex()}"
    )


@pytest.fixture
def redis_factory(redis_url: str) -> BackendFactory:
    return _redis_factory("redis", redis_url)


@pytest.fixture
def redis_cluster_factory(redis_cluster_url: str) -> BackendFactory:
    """The Redis backend on this test process's local 3-master cluster."""
    return _redis_factory("redis-cluster", redis_cluster_url)


@pytest.fixture
def postgres_factory(postgres_url: str) -> BackendFactory:
    from duly.backends.postgres import PostgresBackend

    return BackendFactory(
        "postgres",
        lambda name: PostgresBackend(postgres_url, schema=name),
        f"t_{_hex()}",
        lambda: f"t_{_hex()}",
    )


@pytest.fixture(params=KINDS, ids=KINDS)
def make_backend(request: pytest.FixtureRequest) -> BackendFactory:
    """The factory of this test's backend kind (the one parameter ``backend`` shares)."""
    name = request.param.replace("-", "_")
    factory: BackendFactory = request.getfixturevalue(f"{name}_factory")
    return factory


@pytest.fixture(autouse=True)
def aio() -> Iterator[asyncio.Runner]:
    """This test's event loop."""
    with asyncio.Runner() as runner:
        yield runner


@pytest.fixture
def backend(make_backend: BackendFactory, aio: asyncio.Runner) -> Iterator[Backend]:
    """An opened backend on a namespace of its own, dropped and closed after the test."""
    instance = make_backend()
    aio.run(instance.open())
    try:
        yield instance
        if make_backend.kind == "redis-cluster":
            aio.run(_assert_every_key_hash_tagged(instance))
    finally:
        try:
            aio.run(instance.drop())
        finally:
            aio.run(instance.close())


async def _assert_every_key_hash_tagged(instance: Backend) -> None:
    """Every key on the cluster is a namespace's (``{<namespace>}:...``, keys.py): a script
    that built a key any other way would reach a slot of its own, which fails on another node
    (CROSSSLOT / non-local key) and silently spreads a namespace over slots on the same one."""
    from redis.asyncio.cluster import RedisCluster

    from duly.backends.redis import RedisBackend

    assert isinstance(instance, RedisBackend)
    host, port = instance.topology.nodes[0]
    client = RedisCluster(host=host, port=port)
    try:
        stray = [key async for key in client.scan_iter() if not key.startswith(b"{t")]
    finally:
        await client.aclose()
    assert not stray, f"keys outside any namespace's hash tag: {stray[:10]}"


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """Run ``async def`` tests on the test's own loop, the one its backend was opened in."""
    function = pyfuncitem.obj
    if not inspect.iscoroutinefunction(function):
        return None
    runner: asyncio.Runner = pyfuncitem.funcargs["aio"]
    arguments = {name: pyfuncitem.funcargs[name] for name in inspect.signature(function).parameters}
    runner.run(function(**arguments))
    return True
