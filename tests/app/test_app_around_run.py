"""``Hook.around_run(ctx)``: a context manager entered around each run, on every backend.

It is entered in the run's own thread (a sync task) or asyncio task (an async task), so what it
sets is visible inside the task; what it raises, entering or exiting, fails the run like the
task's own error (retried per the task's policy).
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import duly

TENANT: contextvars.ContextVar[str] = contextvars.ContextVar("tenant", default="none")
LOCAL = threading.local()


class Tenant(duly.Hook):
    """Sets the tenant named by the run's ``tenant`` argument, and records enters and exits."""

    def __init__(self) -> None:
        self.log: list[tuple[str, str, int]] = []

    @contextlib.contextmanager
    def _scope(self, ctx: duly.RunContext) -> Iterator[None]:
        tenant = ctx.kwargs["tenant"]
        self.log.append(("enter", ctx.job.id, ctx.job.attempt))
        token = TENANT.set(tenant)
        LOCAL.tenant = tenant
        try:
            yield
        finally:
            TENANT.reset(token)
            LOCAL.tenant = None
            self.log.append(("exit", ctx.job.id, ctx.job.attempt))

    def around_run(self, ctx: duly.RunContext) -> Any:
        return self._scope(ctx)


class AsyncScope(duly.Hook):
    """An async context manager, for async tasks."""

    @contextlib.asynccontextmanager
    async def _scope(self, ctx: duly.RunContext) -> AsyncIterator[None]:
        token = TENANT.set(f"async-{ctx.kwargs['tenant']}")
        try:
            yield
        finally:
            TENANT.reset(token)

    def around_run(self, ctx: duly.RunContext) -> Any:
        return self._scope(ctx)


class Failing(duly.Hook):
    """Raises entering (``when="enter"``) or exiting (``"exit"``) its context manager."""

    def __init__(self, when: str) -> None:
        self.when = when

    @contextlib.contextmanager
    def _scope(self) -> Iterator[None]:
        if self.when == "enter":
            raise LookupError("no such tenant")
        yield
        raise ConnectionError("commit failed")

    def around_run(self, ctx: duly.RunContext) -> Any:
        return self._scope()


def test_a_sync_run_sees_what_around_run_set_in_its_thread(
    app: duly.App, run_burst: Callable[..., Any]
) -> None:
    hook = app.add_hook(Tenant())

    @app.task(name="around.sync")
    def whoami(tenant: str) -> list[str]:
        return [TENANT.get(), getattr(LOCAL, "tenant", None) or "unset", duly.current_job().id]

    job = whoami.enqueue(tenant="acme")
    run_burst(app)
    assert job.result(timeout=5) == ["acme", "acme", job.id]
    assert hook.log == [("enter", job.id, 1), ("exit", job.id, 1)]


def test_an_async_run_sees_what_a_sync_or_async_manager_set_in_its_task(
    app: duly.App, run_burst: Callable[..., Any]
) -> None:
    app.add_hook(Tenant())
    app.add_hook(AsyncScope())  # added second: entered inside the first

    @app.task(name="around.async")
    async def whoami(tenant: str) -> str:
        return TENANT.get()

    job = whoami.enqueue(tenant="acme")
    run_burst(app)
    assert job.result(timeout=5) == "async-acme"
    assert TENANT.get() == "none"  # nothing leaks out of the run


def test_an_error_entering_fails_the_run_and_is_retried_per_policy(
    app: duly.App, run_burst: Callable[..., Any]
) -> None:
    app.add_hook(Failing("enter"))
    ran: list[int] = []

    @app.task(name="around.enter", retries=1, backoff=duly.Backoff(base=0.01, cap=0.01))
    def never(tenant: str) -> None:
        ran.append(1)

    job = never.enqueue(tenant="acme")
    run_burst(app, settle=[job])
    info = job.info()
    assert (info.status, info.attempts, ran) == ("failed", 2, [])
    errors = [(e["type"], e["message"]) for e in info.errors]
    assert errors == [("LookupError", "no such tenant")] * 2


def test_an_error_exiting_fails_a_run_that_returned(
    app: duly.App, run_burst: Callable[..., Any]
) -> None:
    app.add_hook(Failing("exit"))
    ran: list[int] = []

    @app.task(name="around.exit", retries=0)
    async def done(tenant: str) -> int:
        ran.append(1)
        return 1

    job = done.enqueue(tenant="acme")
    run_burst(app)
    info = job.info()
    assert (info.status, ran) == ("failed", [1])
    assert info.error is not None and info.error["type"] == "ConnectionError"


def test_a_hook_returning_no_context_manager_fails_the_run_with_a_type_error(
    app: duly.App, run_burst: Callable[..., Any]
) -> None:
    class Broken(duly.Hook):
        def around_run(self, ctx: duly.RunContext) -> Any:
            return "not a manager"

    app.add_hook(Broken())

    @app.task(name="around.broken", retries=0)
    def task(tenant: str) -> None: ...

    job = task.enqueue(tenant="acme")
    run_burst(app)
    info = job.info()
    assert info.status == "failed" and info.error is not None
    assert info.error["type"] == "TypeError"
    assert "around_run must return" in info.error["message"]
