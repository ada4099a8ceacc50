"""Running a task inside the context managers of its app's ``Hook.around_run`` hooks.

Only used when some hook overrides ``around_run``: a run without one pays nothing. The
managers are entered where the task runs (the pool thread of a sync task, the asyncio task of
an async one), the first hook's outermost; what they raise, entering or exiting, is the run's
error, as the task's own would be.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

from duly._context import RunContext
from duly._hooks import Around

__all__ = ["call_around", "run_around"]


def _not_a_manager(around: Callable[[RunContext], Around], manager: object, kind: str) -> TypeError:
    return TypeError(f"{around.__qualname__} returned {manager!r}: around_run must return {kind}")


def call_around(
    arounds: Sequence[Callable[[RunContext], Around]],
    ctx: RunContext,
    fn: Callable[..., Any],
) -> Any:
    """``fn(*ctx.args, **ctx.kwargs)`` inside the hooks' context managers (a sync task, on its
    own thread)."""
    with contextlib.ExitStack() as stack:
        for around in arounds:
            manager = around(ctx)
            if not isinstance(manager, contextlib.AbstractContextManager):
                raise _not_a_manager(around, manager, "a context manager for a sync task")
            stack.enter_context(manager)
        return fn(*ctx.args, **ctx.kwargs)


async def run_around(
    arounds: Sequence[Callable[[RunContext], Around]],
    ctx: RunContext,
    call: Callable[[], Any],
) -> Any:
    """Await ``call()`` inside the hooks' context managers, sync or async (an async task, or
    an isolated task's wait for its child)."""
    async with contextlib.AsyncExitStack() as stack:
        for around in arounds:
            manager = around(ctx)
            if isinstance(manager, contextlib.AbstractAsyncContextManager):
                await stack.enter_async_context(manager)
            elif isinstance(manager, contextlib.AbstractContextManager):
                stack.enter_context(manager)
            else:
                raise _not_a_manager(around, manager, "a context manager")
        return await call()
