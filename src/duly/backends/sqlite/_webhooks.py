"""Webhooks on SQLite: one row per hook in ``webhooks`` (0005_webhooks.sql), by digest."""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Callable

from duly._records import WebhookRecord
from duly.backends.sqlite._tx import QUERIES

__all__ = ["delete_webhook_tx", "get_webhook", "store_webhook_tx"]


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
