"""How an App reaches a web framework's database transactions.

Two enqueue options need to know the framework the caller runs in:

- ``task.options(connection=...)`` enqueues inside the caller's transaction. The PostgreSQL
  backend needs the driver's connection (a ``psycopg.Connection``); a framework hands out its
  own wrapper (Django's ``django.db.connection``). ``driver_connection`` unwraps it.
- ``task.options(on_commit=True)`` enqueues once the caller's transaction commits, on any
  backend. ``on_commit`` registers the enqueue with the framework (Django's
  ``transaction.on_commit``).

An integration (``duly.contrib.django``) gives its App an object with both methods:
``duly.App(transactions=...)``. duly's core imports no framework.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

__all__ = ["Transactions"]


@runtime_checkable
class Transactions(Protocol):
    """A framework's transactions, as ``App(transactions=...)`` uses them."""

    def driver_connection(self, connection: Any) -> Any:
        """The database driver's connection under ``connection`` (a framework's wrapper), or
        ``connection`` itself when it is already one."""
        ...

    def on_commit(self, callback: Callable[[], object]) -> None:
        """Call ``callback`` once the caller's current transaction commits (at once when no
        transaction is open; never when it rolls back)."""
        ...
