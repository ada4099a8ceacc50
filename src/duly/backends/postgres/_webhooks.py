"""Webhooks on PostgreSQL: one row per hook in ``webhooks`` (0006_webhooks.sql), by digest."""

from __future__ import annotations

import dataclasses

from duly._records import WebhookRecord
from duly.backends.postgres._groups import Grouping

__all__ = ["Webhooks"]


class Webhooks(Grouping):
    """``store_webhook``, ``get_webhook`` and ``delete_webhook``."""

    async def store_webhook(self, hook: WebhookRecord) -> None:
        if await self._one("insert_webhook", dataclasses.asdict(hook)) is None:
            raise ValueError("a webhook with this secret is already stored")

    async def get_webhook(self, digest: str) -> WebhookRecord | None:
        row = await self._one("get_webhook", {"digest": digest}, retry=True)
        if row is None:
            return None
        digest_, task, queue, payload, key, priority, delay, created_at = row
        return WebhookRecord(
            digest_, task, queue, bytes(payload), key, int(priority), float(delay), created_at
        )

    async def delete_webhook(self, digest: str) -> bool:
        return await self._one("delete_webhook", {"digest": digest}, retry=True) is not None
