"""Django's transactions as duly's ``Transactions`` (see ``duly._transactions``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from duly._errors import ConfigurationError

__all__ = ["DjangoTransactions"]


class DjangoTransactions:
    """``connection=django.db.connection`` (or ``connections[alias]``) unwrapped to its psycopg
    3 connection, and ``on_commit=True`` through ``transaction.on_commit`` on database
    ``using``."""

    def __init__(self, using: str = "default") -> None:
        self.using = using

    def __repr__(self) -> str:
        return f"<DjangoTransactions using={self.using!r}>"

    def driver_connection(self, connection: Any) -> Any:
        """The psycopg 3 connection under a Django database connection (opened if it was
        not); anything else is returned as it is."""
        if not (hasattr(connection, "vendor") and hasattr(connection, "ensure_connection")):
            return connection
        if connection.vendor != "postgresql":
            raise ConfigurationError(
                f"connection= joins a transaction on PostgreSQL only, and Django's "
                f"{connection.alias!r} database is {connection.vendor}: use "
                f"options(on_commit=True) to enqueue once the transaction commits"
            )
        connection.ensure_connection()
        raw = connection.connection
        import psycopg

        if not isinstance(raw, psycopg.Connection):
            raise ConfigurationError(
                "connection= needs Django on psycopg 3 (pip install 'psycopg[binary]'); "
                f"this connection is a {type(raw).__module__}.{type(raw).__name__}"
            )
        return raw

    def on_commit(self, callback: Callable[[], object]) -> None:
        """``transaction.on_commit(callback, using=...)``: after the commit of the atomic block
        around the caller, at once outside one, never on a rollback. An enqueue that fails
        there raises from the end of the ``atomic()`` block (its data is committed)."""
        from django.db import transaction

        transaction.on_commit(callback, using=self.using)
