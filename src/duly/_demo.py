"""The demo app of ``duly demo``: a realistic mix of jobs on the embedded default backend.

Its tasks: image thumbnails (sync), welcome e-mails (async), a payment-provider sync that fails
once and succeeds on retry, a card charge that fails for good, and reminders that run later.
"""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

from duly._app import App
from duly._context import current_job
from duly._retry import Backoff
from duly._task import Task

__all__ = ["build_app"]


class ProviderDown(ConnectionError):
    """The (simulated) payment provider did not answer."""


class CardDeclined(ValueError):
    """The (simulated) card was declined."""


def build_app(url: str | None = None) -> tuple[App, dict[str, Task[..., Any]]]:
    """The demo App on ``url`` (default: $DULY_URL, then sqlite:///duly.db) and its tasks."""
    app = App(url)

    @app.task(name="demo.make_thumbnail", timeout=10)
    def make_thumbnail(image_id: int, size: int = 256) -> dict[str, object]:
        time.sleep(random.uniform(0.05, 0.4))
        return {"image": image_id, "thumbnail": f"/thumbs/{image_id}_{size}.webp"}

    @app.task(name="demo.send_welcome_email", timeout=10)
    async def send_welcome_email(user_id: int) -> str:
        await asyncio.sleep(random.uniform(0.05, 0.3))
        return f"welcome mail sent to user {user_id}"

    @app.task(name="demo.sync_payments", retries=3, backoff=Backoff(base=0.5, cap=2))
    def sync_payments(account: str) -> str:
        if current_job().attempt == 1:
            raise ProviderDown("payment provider timed out (simulated; the retry will succeed)")
        time.sleep(0.1)
        return f"payments of {account} synced"

    @app.task(name="demo.charge_card", retries=1, backoff=Backoff(base=0.5, cap=1))
    def charge_card(order_id: int, cents: int) -> str:
        raise CardDeclined(f"card declined for order {order_id} ({cents} cents)")

    @app.task(name="demo.send_reminder", queue="default")
    async def send_reminder(user_id: int) -> str:
        await asyncio.sleep(0.05)
        return f"reminder sent to user {user_id}"

    tasks: dict[str, Task[..., Any]] = {
        "make_thumbnail": make_thumbnail,
        "send_welcome_email": send_welcome_email,
        "sync_payments": sync_payments,
        "charge_card": charge_card,
        "send_reminder": send_reminder,
    }
    return app, tasks


#: ``duly worker duly.demo:app`` runs the demo's jobs on $DULY_URL.
app, _tasks = build_app()
