"""Webhooks on SQLite: one row per hook in ``webhooks`` (0005_webhooks.sql), by digest."""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Callable

from duly._records import WebhookRecord
from duly.backends.sqlite._connection import QUERIES, SqliteConnection

__all__ = ["SqliteWebhooks"]


def store_webhook_tx(hook: WebhookRecord) -> Callable[[sqlite3.Connection], bool]:
    """The store transaction: True if stored, False if the digest was taken."""
    row = dataclasses.asdict(hook)

    def store(conn: sqlite3.Connection) -> bool:
        return conn.execute(QUERIES["insert_webhook"], row).rowcount > 0

    return store


def get_webhook(digest: str) -> Callable[[sqlite3.Connection], WebhookRecord | None]:
    """Reads one webhook by digest, or None."""

    def read(conn: sqlite3.Connection) -> WebhookRecord | None:
        row = conn.execute(QUERIES["get_webhook"], {"digest": digest}).fetchone()
        if row is None:
            return None
        digest_, task, queue, payload, key, priority, delay, created_at = row
        return WebhookRecord(
            digest_, task, queue, bytes(payload), key, int(priority), float(delay), created_at
        )

    return read


def delete_webhook_tx(digest: str) -> Callable[[sqlite3.Connection], bool]:
    """The delete transaction: True if a row was deleted."""

    def delete(conn: sqlite3.Connection) -> bool:
        return conn.execute(QUERIES["delete_webhook"], {"digest": digest}).rowcount > 0

    return delete


class SqliteWebhooks:
    """``duly.backends.webhooks.WebhookStore`` on SQLite (``backend.webhooks``)."""

    def __init__(self, db: SqliteConnection) -> None:
        self._db = db

    async def store(self, hook: WebhookRecord) -> None:
        """Store a webhook under its digest; ValueError if the digest is taken."""
        if not await self._db.transaction(store_webhook_tx(hook), "store_webhook"):
            raise ValueError("a webhook with this secret is already stored")

    async def get(self, digest: str) -> WebhookRecord | None:
        """The webhook stored under ``digest``, or None."""
        return await self._db.run(get_webhook(digest), "get_webhook")

    async def delete(self, digest: str) -> bool:
        """Delete the webhook under ``digest``; False if none."""
        return await self._db.transaction(delete_webhook_tx(digest), "delete_webhook")
