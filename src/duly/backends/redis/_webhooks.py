"""Webhooks on Redis: the ``hooks`` hash of the namespace (see keys.py), digest -> msgpack of
the record. Each primitive is one command (HSETNX, HGET, HDEL), so each is atomic."""

from __future__ import annotations

import dataclasses
from typing import Any, cast

import msgspec

from duly._records import WebhookRecord
from duly.backends.redis._keys import Keyspace

__all__ = ["delete_webhook", "get_webhook", "store_webhook"]

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
