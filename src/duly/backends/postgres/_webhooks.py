"""Webhooks on PostgreSQL: one row per hook in ``webhooks`` (0006_webhooks.sql), by digest."""

from __future__ import annotations

import dataclasses

from duly._records import WebhookRecord
from duly.backends.postgres._connection import Connection

__all__ = ["PostgresWebhooks"]


class PostgresWebhooks:
    """``duly.backends.webhooks.WebhookStore`` on PostgreSQL (``backend.webhooks``)."""

    def __init__(self, db: Connection) -> None:
        self._db = db

    async def store(self, hook: WebhookRecord) -> None:
        """Insert the row; ValueError if the digest is taken."""
        if await self._db.one("insert_webhook", dataclasses.asdict(hook)) is None:
            raise ValueError("a webhook with this secret is already stored")

    async def get(self, digest: str) -> WebhookRecord | None:
        """The row, or None."""
        row = await self._db.one("get_webhook", {"digest": digest}, retry=True)
        if row is None:
            return None
        digest_, task, queue, payload, key, priority, delay, created_at = row
        return WebhookRecord(
            digest_, task, queue, bytes(payload), key, int(priority), float(delay), created_at
        )

    async def delete(self, digest: str) -> bool:
        """Delete the row; False if there was none."""
        return await self._db.one("delete_webhook", {"digest": digest}, retry=True) is not None
