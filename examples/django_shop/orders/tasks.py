"""The shop's jobs (found by ``duly.contrib.django`` when Django starts).

``order_unshipped`` is seed 004's watch: a first check 3 h after the order, a reminder then,
an escalation at 6 h, done as soon as the order ships (``ship_order`` stops it).
``SHOP_HOUR`` (seconds, default 3600) shrinks the hour to try it quickly.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta

from orders.models import Email, Order

from duly.contrib.django import app

HOUR = timedelta(seconds=float(os.environ.get("SHOP_HOUR", "3600")))
REMIND_AFTER = 3 * HOUR
ESCALATE_AFTER = 6 * HOUR


@app.task(retries=5)
def send_confirmation(order_id: int) -> None:
    """Email the customer that the order was placed."""
    Email.objects.create(order_id=order_id, kind="confirmation")


@app.watch(max_checks=3, horizon=24 * HOUR, timeout=timedelta(seconds=30), slot=HOUR / 4)
def order_unshipped(order_id: int) -> datetime | None:
    """One check of an order: None once it shipped or escalated, else when to check again."""
    order = Order.objects.filter(id=order_id).first()
    if order is None or order.shipped_at is not None:
        return None
    start = max(order.placed_at, order.ship_after or order.placed_at)
    now = datetime.now(UTC)
    if now < start + REMIND_AFTER:  # not due yet: the customer asked to ship later
        return start + REMIND_AFTER
    if now < start + ESCALATE_AFTER:
        Email.objects.create(order=order, kind="reminder")
        return start + ESCALATE_AFTER
    Email.objects.create(order=order, kind="escalation")
    return None
