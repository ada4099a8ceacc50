"""``POST /hooks/{secret}``: webhooks (``app.create_webhook``)."""

from __future__ import annotations

from typing import Final

from duly.http.api import Endpoint

__all__ = ["ENDPOINTS"]

ENDPOINTS: Final[tuple[Endpoint, ...]] = ()
