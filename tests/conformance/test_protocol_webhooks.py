"""Webhooks: store / get / delete by the digest of the secret, on every backend."""

from __future__ import annotations

import hashlib

import pytest
from contract import T0

from duly._records import WebhookRecord
from duly.backends.base import Backend

pytestmark = pytest.mark.timeout(30)


def hook(secret: str, **fields: object) -> WebhookRecord:
    values: dict[str, object] = {
        "digest": hashlib.sha256(secret.encode()).hexdigest(),
        "task": "t.sync",
        "queue": "sync",
        "payload": b'{"args":[456],"kwargs":{"\\u00e9":"\\u00ff"}}\x00\xff',
        "key": "link:456",
        "priority": 5,
        "delay": 2.5,
        "created_at": T0,
    }
    values.update(fields)
    return WebhookRecord(**values)  # type: ignore[arg-type]


async def test_a_webhook_round_trips_exactly(backend: Backend) -> None:
    stored = hook("s1")
    await backend.webhooks.store(stored)
    assert await backend.webhooks.get(stored.digest) == stored
    plain = hook("s2", key=None, priority=0, delay=0.0)
    await backend.webhooks.store(plain)
    assert await backend.webhooks.get(plain.digest) == plain


async def test_an_unknown_digest_is_none(backend: Backend) -> None:
    assert await backend.webhooks.get(hook("nope").digest) is None
    assert await backend.webhooks.delete(hook("nope").digest) is False


async def test_a_digest_is_stored_once(backend: Backend) -> None:
    await backend.webhooks.store(hook("s1"))
    with pytest.raises(ValueError):
        await backend.webhooks.store(hook("s1", task="t.other"))
    found = await backend.webhooks.get(hook("s1").digest)
    assert found is not None and found.task == "t.sync"


async def test_delete_revokes_only_that_webhook(backend: Backend) -> None:
    await backend.webhooks.store(hook("s1"))
    await backend.webhooks.store(hook("s2"))
    assert await backend.webhooks.delete(hook("s1").digest) is True
    assert await backend.webhooks.get(hook("s1").digest) is None
    assert await backend.webhooks.delete(hook("s1").digest) is False
    assert await backend.webhooks.get(hook("s2").digest) == hook("s2")
