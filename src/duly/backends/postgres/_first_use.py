"""The schema at a backend's first use, when that use is the caller's own connection.

``PostgresBackend.enqueue_on`` runs inside the caller's transaction. On a fresh schema the
first such call (``task.options(connection=conn).enqueue(...)`` as an app's very first use)
would meet missing tables there, and a failed statement aborts the caller's whole transaction.
Migrating on the caller's connection would be no better: the DDL would commit or roll back
with the caller's work, and hold its locks until then. So before its first enqueue on a
caller's connection, a backend readies the schema on a connection of its own: it migrates
(``auto_migrate``) or checks that nothing is missing, and only then touches the caller's
connection. Later calls cost one attribute read.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

__all__ = ["FirstUse", "run_blocking"]

T = TypeVar("T")


def run_blocking(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run the coroutine ``make()`` to its end from sync code, even from inside a running
    event loop (on a thread of its own, with a loop of its own); re-raise its error."""
    outcome: list[T] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            outcome.append(asyncio.run(make()))
        except BaseException as exc:  # re-raised on the caller's thread
            failure.append(exc)

    thread = threading.Thread(target=run, name="duly-migrate")
    thread.start()
    thread.join()
    if failure:
        raise failure[0]
    return outcome[0]


class FirstUse:
    """Readies a schema once per backend: ``prepare`` migrates it or checks it is complete
    (raising ``ConfigurationError`` if not), on the backend's own connections."""

    def __init__(self, prepare: Callable[[], Coroutine[Any, Any, object]]) -> None:
        self._prepare = prepare
        #: Set once the schema was seen complete (by ``prepare`` or the backend's ``open``).
        #: Two first uses at once may both prepare: migrating is idempotent and serialised by
        #: an advisory lock, so that costs a few statements, never a wrong schema.
        self.ready = False

    def ensure_blocking(self) -> None:
        """Ready the schema from sync code (a no-op once ready)."""
        if not self.ready:
            run_blocking(self._prepare)
            self.ready = True

    async def ensure(self) -> None:
        """Ready the schema from async code (a no-op once ready)."""
        if not self.ready:
            await self._prepare()
            self.ready = True
