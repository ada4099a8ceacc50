"""Webhooks on Redis: the ``hooks`` hash of the namespace (see keys.py), digest -> msgpack of
the record. Each primitive is one command (HSETNX, HGET, HDEL), so each is atomic."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, cast

import msgspec

from duly._records import WebhookRecord
from duly.backends.redis._keys import Keyspace

if TYPE_CHECKING:
    from duly.backends.redis._connection import RedisConnection

__all__ = ["RedisWebhooks"]

_FIELDS = [f.name for f in dataclasses.fields(WebhookRecord)]


async def store_webhook(client: Any, keys: Keyspace, hook: WebhookRecord) -> None:
    """HSETNX the record; ValueError if the digest is taken."""
    packed = msgspec.msgpack.encode([getattr(hook, name) for name in _FIELDS])
    if not await client.hsetnx(keys.webhooks, hook.digest, packed):
        raise ValueError("a webhook with this secret is already stored")


async def get_webhook(client: Any, keys: Keyspace, digest: str) -> WebhookRecord | None:
    """HGET the record, or None."""
    packed = cast(bytes | None, await client.hget(keys.webhooks, digest))
    if packed is None:
        return None
    values = msgspec.msgpack.decode(packed)
    return WebhookRecord(**dict(zip(_FIELDS, values, strict=True)))


async def delete_webhook(client: Any, keys: Keyspace, digest: str) -> bool:
    """HDEL the record; False if there was none."""
    return bool(await client.hdel(keys.webhooks, digest))


class RedisWebhooks:
    """``duly.backends.webhooks.WebhookStore`` on Redis (``backend.webhooks``)."""

    def __init__(self, conn: RedisConnection) -> None:
        self._conn = conn

    async def store(self, hook: WebhookRecord) -> None:
        """HSETNX the record; ValueError if the digest is taken."""
        c = self._conn
        with c.guard("store_webhook"):
            await store_webhook(c.client, c.keys, hook)

    async def get(self, digest: str) -> WebhookRecord | None:
        """The record, or None."""
        c = self._conn
        with c.guard("get_webhook"):
            return await get_webhook(c.client, c.keys, digest)

    async def delete(self, digest: str) -> bool:
        """HDEL the record; False if there was none."""
        c = self._conn
        with c.guard("delete_webhook"):
            return await delete_webhook(c.client, c.keys, digest)
