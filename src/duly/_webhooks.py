"""Webhooks: a secret URL that enqueues a fixed job (PRODUCT §9, seed 003).

    hook = app.create_webhook(sync_link.s(link_id=456))   # duly.Webhook(secret=..., path=...)
    # POST <mount>/hooks/<secret>  ->  202 {"job_id": ...}: sync_link(link_id=456) enqueued
    app.revoke_webhook(hook.secret)                       # the URL answers 404 from now on

The secret (32 random bytes, URL-safe) is shown once, by ``create_webhook``; the backend keeps
only its SHA-256, so a dump of the storage holds no usable URL, and a hit is one lookup by
that digest (no comparison against stored secrets, so timing tells nothing about them). The
job is fixed when the hook is created (task, arguments, queue, key, priority, delay): a hit
sends no arguments, and a request body is ignored.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from duly._errors import ConfigurationError, TaskNotFound
from duly._payload import decode_payload
from duly._records import WebhookRecord
from duly._task import Signature
from duly.backends.webhooks import WEBHOOKS

if TYPE_CHECKING:
    from duly._ports import AppPort

__all__ = ["Webhook", "create_webhook", "digest", "fire_webhook", "revoke_webhook"]

#: Longest secret looked up (``create_webhook`` makes 43 characters).
MAX_SECRET: Final = 200


@dataclass(frozen=True, slots=True)
class Webhook:
    """A created webhook: ``secret`` (the credential; shown only now) and ``path``
    (``/hooks/<secret>``, relative to where the ASGI app is mounted)."""

    secret: str
    path: str

    def __repr__(self) -> str:  # the secret stays out of logs and tracebacks
        return "<duly.Webhook /hooks/***>"


def digest(secret: str) -> str:
    """The SHA-256 (hex) a webhook's secret is stored under."""
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


async def create_webhook(app: AppPort, sig: Signature) -> Webhook:
    """Store a webhook enqueueing ``sig``; see the module docstring."""
    if not isinstance(sig, Signature):
        raise TypeError(f"create_webhook takes task.s(...), got {sig!r}")
    if sig.task.app is not app:
        raise ValueError(f"{sig!r} belongs to another App")
    options = sig.options
    if options.at is not None or options.connection is not None or options.on_commit:
        raise ConfigurationError(
            "a webhook's job takes delay=, key=, queue=, priority= but not "
            "at=, connection= or on_commit="
        )
    now = app.clock.now()
    job = sig.build(now)  # validates and encodes the arguments now
    secret = secrets.token_urlsafe(32)
    record = WebhookRecord(
        digest=digest(secret),
        task=job.task,
        queue=job.queue,
        payload=job.payload,
        key=options.key,
        priority=job.priority,
        delay=float(options.delay or 0.0),
        created_at=now,
    )
    await WEBHOOKS.of(await app.backend()).store(record)
    return Webhook(secret=secret, path=f"/hooks/{secret}")


async def revoke_webhook(app: AppPort, secret: str) -> bool:
    """Delete the webhook of ``secret``; False if there was none."""
    if not isinstance(secret, str):
        raise TypeError(f"a webhook secret is a str, got {secret!r}")
    return await WEBHOOKS.of(await app.backend()).delete(digest(secret))


async def fire_webhook(app: AppPort, secret: str) -> str | None:
    """Enqueue the job of the webhook of ``secret``; its id, or None for an unknown secret.

    ``TaskNotFound`` if this process does not know the hook's task."""
    if not secret or len(secret) > MAX_SECRET:
        return None
    backend = await app.backend()
    record = await WEBHOOKS.of(backend).get(digest(secret))
    if record is None:
        return None
    task = app.tasks.get(record.task)
    if task is None:
        raise TaskNotFound(f"the webhook's task {record.task!r} is not registered here")
    try:
        args, kwargs = decode_payload(record.payload)
    except ValueError:
        args, kwargs = [], {}
    now = app.clock.now()
    job = task.config.new_job(
        record.payload,
        tuple(args),
        kwargs,
        now,
        scheduled_for=now + record.delay,
        queue=record.queue,
        key=record.key,
        priority=record.priority,
    )
    if app.hooks.watching("enqueuing"):
        app.hooks.enqueuing([job])
    results = await app.enqueue_built([job])
    if app.hooks.watching("enqueued"):
        await app.hooks.emit("enqueued", [job], results)
    return str(results[0].id)
