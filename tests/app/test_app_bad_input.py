"""Bad input and faults (PRODUCT §12): a clear error at the call, and nothing stored."""

from __future__ import annotations

import asyncio
import socket
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import duly

pytestmark = pytest.mark.timeout(60)


class Thing:
    """Not JSON."""


@pytest.fixture
def add(app: duly.App) -> duly.Task[Any, Any]:
    @app.task(name="t.add")
    def add(a: Any, b: Any = 0) -> Any:
        return a + b

    return add


def test_an_argument_that_does_not_serialize_is_named(app: duly.App, add) -> None:
    with pytest.raises(TypeError, match=r"positional argument 1 \(b\) is an object") as raised:
        add.enqueue(1, object())
    assert isinstance(raised.value, duly.SerializationError)
    assert isinstance(raised.value, duly.DulyError)
    assert "t.add" in str(raised.value)
    with pytest.raises(TypeError, match=r"argument 'b' is a Thing"):
        add.enqueue(1, b=Thing())
    with pytest.raises(TypeError, match="'b'"):
        add.enqueue(1, b=lambda: 1)

    async def go() -> None:
        try:
            await add.enqueue_async(1, b=object())
        finally:
            await app.aclose()

    with pytest.raises(TypeError, match="'b'"):
        asyncio.run(go())
    assert app.jobs() == []


def test_a_payload_over_the_limit_is_refused(make_app) -> None:
    app = make_app(max_payload_bytes=1000)

    @app.task(name="t.echo")
    def echo(data: str) -> str:
        return data

    echo.enqueue("x" * 900)
    with pytest.raises(duly.PayloadTooLarge, match="1000") as raised:
        echo.enqueue("x" * 1000)
    assert isinstance(raised.value, ValueError)
    assert isinstance(raised.value, duly.PayloadError)
    assert len(app.jobs()) == 1
    with pytest.raises(ValueError):
        make_app(max_payload_bytes=0)


def test_the_default_payload_limit_is_one_mebibyte(app: duly.App, add) -> None:
    add.enqueue("x" * 1_000_000)
    with pytest.raises(duly.PayloadTooLarge):
        add.enqueue("x" * (1024 * 1024))


def test_bad_times(app: duly.App, add) -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        add.options(at=datetime.now() + timedelta(hours=1)).enqueue(1)  # naive
    with pytest.raises(TypeError):
        add.options(at="2030-01-01T00:00:00Z").enqueue(1)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        add.options(at=time.time() + 60).enqueue(1)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        add.options(delay=-1).enqueue(1)
    with pytest.raises(ValueError):
        add.options(delay=timedelta(seconds=-5)).enqueue(1)
    with pytest.raises(TypeError):
        add.options(delay="10").enqueue(1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not both"):
        add.options(delay=5, at=datetime.now(UTC)).enqueue(1)
    assert app.jobs() == []


@pytest.mark.parametrize(
    ("priority", "error"),
    [
        (1001, ValueError),
        (-1001, ValueError),
        (True, TypeError),
        (1.5, TypeError),
        ("9", TypeError),
    ],
)
def test_bad_priority(app: duly.App, add, priority: Any, error: type[Exception]) -> None:
    with pytest.raises(error):
        add.options(priority=priority).enqueue(1)
    with pytest.raises(error):

        @app.task(name="t.bad_priority", priority=priority)
        def f() -> None:
            return None

    assert app.jobs() == []


@pytest.mark.parametrize("queue", ["", "has space", "x" * 101, "a/b", "é", 7])
def test_bad_queue_names(app: duly.App, add, queue: Any) -> None:
    with pytest.raises(ValueError, match="queue"):
        add.options(queue=queue).enqueue(1)
    with pytest.raises(ValueError, match="queue"):

        @app.task(name="t.bad_queue", queue=queue)
        def f() -> None:
            return None

    with pytest.raises(ValueError, match="queue"):
        app.worker(queues=[queue])
    assert app.jobs() == []


def test_bad_keys(app: duly.App, add) -> None:
    with pytest.raises(ValueError, match="key"):
        add.options(key="").enqueue(1)
    with pytest.raises(ValueError, match="key"):
        add.options(key="k" * 513).enqueue(1)
    with pytest.raises(ValueError, match="key"):
        add.options(key=7).enqueue(1)  # type: ignore[arg-type]
    add.options(key="k" * 512).enqueue(1)
    assert len(app.jobs()) == 1


def test_bad_task_settings(app: duly.App) -> None:
    def f() -> None:
        return None

    with pytest.raises(ValueError):
        app.task(retries=-1)(f)
    with pytest.raises(TypeError):
        app.task(retries=1.5)(f)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        app.task(timeout=0)(f)
    with pytest.raises(ValueError):
        app.task(timeout=-3)(f)
    with pytest.raises(TypeError):
        app.task(retry_on=(ValueError, "nope"))(f)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        app.task(backoff=5)(f)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        duly.Backoff(base=0)
    with pytest.raises(ValueError):
        duly.Backoff(base=10, cap=1)
    with pytest.raises(ValueError):
        duly.Retry(after=-1)
    with pytest.raises(TypeError):
        app.task(name="t.not_callable")(42)  # type: ignore[call-overload]
    assert app.tasks == {}


def test_two_tasks_with_one_name(app: duly.App) -> None:
    @app.task(name="t.same")
    def one() -> None:
        return None

    with pytest.raises(duly.ConfigurationError, match=r"t\.same"):

        @app.task(name="t.same")
        def two() -> None:
            return None


def test_bad_lookups(app: duly.App, add) -> None:
    with pytest.raises(TypeError):
        app.get_job(123)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="status"):
        app.jobs(status="done")
    with pytest.raises(ValueError, match="limit"):
        app.jobs(limit=0)
    with pytest.raises(ValueError, match="limit"):
        app.jobs(limit=10_001)
    with pytest.raises(TypeError):
        app.enqueue_many([add])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        app.retry(None)  # type: ignore[arg-type]
    # An id no backend can store (PostgreSQL refuses NUL in text) names no job, on every backend.
    assert app.get_job("01J\x00X") is None
    assert app.retry("01J\x00X") is False and app.cancel("01J\x00X") is False


def test_bad_worker_settings(app: duly.App) -> None:
    with pytest.raises(duly.ConfigurationError):
        app.worker(concurrency=0)
    with pytest.raises(duly.ConfigurationError):
        app.worker(lease=1.9)
    with pytest.raises(duly.ConfigurationError):
        app.worker(grace=-1)


def test_bad_urls_and_namespaces(tmp_path: Path) -> None:
    with pytest.raises(duly.ConfigurationError, match="unsupported"):
        duly.App("mysql://localhost/db")
    with pytest.raises(duly.ConfigurationError, match="unsupported"):
        duly.App("localhost:6379")
    with pytest.raises(duly.ConfigurationError, match="namespace"):
        duly.App(f"sqlite:///{tmp_path}/x.db", namespace="a b")
    with pytest.raises(duly.ConfigurationError, match="namespace"):
        duly.App("redis://127.0.0.1:6379/0", namespace="x;DROP")
    with pytest.raises(duly.ConfigurationError, match="namespace"):
        duly.App("postgresql://postgres@127.0.0.1:5432/test?namespace=a.b")


def _unused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


DOWN_URLS = {
    "sqlite": lambda tmp: f"sqlite:///{tmp}/no/such/directory/duly.db",
    "redis": lambda tmp: "redis://127.0.0.1:1/0",
    "postgres": lambda tmp: f"postgresql://postgres@127.0.0.1:{_unused_port()}/test",
}


@pytest.mark.parametrize("kind", list(DOWN_URLS))
def test_backend_down_at_enqueue(kind: str, tmp_path: Path) -> None:
    url = DOWN_URLS[kind](tmp_path)
    with duly.App(url) as app:

        @app.task(name="t.add")
        def add(a: int, b: int) -> int:
            return a + b

        started = time.monotonic()
        with pytest.raises(duly.BackendUnavailable) as raised:
            add.enqueue(1, 2)
        assert time.monotonic() - started < 30
        message = str(raised.value)
        assert message and "\n" not in message.strip()
        with pytest.raises(duly.BackendUnavailable):
            app.enqueue_many([add.s(1, 2)])
        with pytest.raises(duly.BackendUnavailable):
            app.get_job("01ARZ3NDEKTSV4RRFFQ69G5FAV")

        async def go() -> None:
            try:
                await add.enqueue_async(1, 2)
            finally:
                await app.aclose()

        with pytest.raises(duly.BackendUnavailable):
            asyncio.run(go())
    if kind == "sqlite":
        assert not (tmp_path / "no").exists(), "nothing was created"


def test_a_nul_character_is_refused_before_any_backend(app: duly.App, add) -> None:
    """Issue 28 item 6: PostgreSQL text cannot hold NUL, so a name or key with one is refused
    on every backend alike, at registration or enqueue, with a ConfigurationError (a
    ValueError) that quotes no key (a key may come from secret arguments); nothing stored."""

    def refused(what: str) -> Any:
        return pytest.raises(duly.ConfigurationError, match=rf"{what}.*NUL")

    with refused("task name"):

        @app.task(name="t.a\x00b")
        def named(x: int) -> int:
            return x

    with refused("queue name"):
        app.task(name="t.q", queue="q\x00")(lambda: None)
    with refused("queue name"):
        add.options(queue="q\x00").enqueue(1)
    with refused("key="):
        add.options(key="k\x00ey").enqueue(1)
    with refused("key="):
        app.group([add.s(1)], key="g\x00")

    @app.task(name="t.locked", mutex="team:{team}")
    def locked(team: str) -> str:
        return team

    with refused("mutex=") as raised:
        locked.enqueue("SECRET\x00")
    assert "SECRET" not in str(raised.value)
    with refused("freshness name"):
        app.freshness("env\x00s", sync=lambda scope, full: None, max_staleness=timedelta(1))
    envs = app.freshness("envs", sync=lambda scope, full: None, max_staleness=timedelta(1))
    with refused("freshness scope"):
        envs.check("team\x00:7")
    assert issubclass(duly.ConfigurationError, ValueError)
    assert app.jobs() == []
