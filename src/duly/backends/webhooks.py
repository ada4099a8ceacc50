"""The webhooks capability (PRODUCT §9): secret URLs that enqueue a fixed job.

(The webhooks themselves: ``duly._webhooks``.)
"""

from __future__ import annotations

from typing import Final, Protocol

from duly._records import WebhookRecord
from duly.backends.capability import Capability

__all__ = ["WEBHOOKS", "WebhookStore"]


class WebhookStore(Protocol):
    """Webhooks by the digest of their secret; no retention (they stay until deleted)."""

    async def store(self, hook: WebhookRecord) -> None:
        """Store ``hook`` under its digest, atomically; ValueError (nothing stored) if that
        digest is stored already."""
        ...

    async def get(self, digest: str) -> WebhookRecord | None:
        """The webhook stored under ``digest``, or None (one lookup by key, never a scan)."""
        ...

    async def delete(self, digest: str) -> bool:
        """Delete the webhook stored under ``digest``; False if there was none."""
        ...


#: ``backend.webhooks``.
WEBHOOKS: Final = Capability[WebhookStore]("webhooks", "app.create_webhook(...)")
