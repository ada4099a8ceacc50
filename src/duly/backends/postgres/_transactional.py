"""Transactional enqueue on PostgreSQL (``duly.backends.transactional``): jobs inserted with
the caller's own connection, inside its transaction (see ``_enqueue.enqueue_on``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from duly._records import EnqueueResult, NewJob
from duly.backends.postgres._connection import Connection
from duly.backends.postgres._enqueue import enqueue_on, enqueue_on_async
from duly.backends.postgres._migrate import Schema

__all__ = ["PostgresTransactional"]


class PostgresTransactional:
    """``duly.backends.transactional.TransactionalEnqueue`` on PostgreSQL
    (``backend.transactional``)."""

    def __init__(self, db: Connection, schema: Schema) -> None:
        self._db = db
        self._schema = schema

    def enqueue(self, conn: Any, jobs: Sequence[NewJob]) -> list[EnqueueResult]:
        """Insert ``jobs`` with the caller's connection, inside its current transaction."""
        return enqueue_on(self._db, self._schema, conn, jobs)

    async def enqueue_async(self, conn: Any, jobs: Sequence[NewJob]) -> list[EnqueueResult]:
        """The async twin of ``enqueue``, for a ``psycopg.AsyncConnection``."""
        return await enqueue_on_async(self._db, self._schema, conn, jobs)
