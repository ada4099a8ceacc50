"""Placing and shipping orders: the order and its jobs change together.

When the jobs live in the shop's own PostgreSQL database, they are stored by the order's own
transaction (``connection=``): the order and its watch exist together or not at all. On any
other backend they are enqueued once that transaction commits (``on_commit=True``): a rolled
back order starts nothing.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.db import connection, transaction
from orders.models import Order
from orders.tasks import REMIND_AFTER, order_unshipped, send_confirmation

from duly.contrib.django import app


def with_the_order() -> dict[str, Any]:
    """The enqueue option that ties a job to the current transaction."""
    if connection.vendor == "postgresql" and app.url.startswith("postgresql"):
        return {"connection": connection}  # same database: inside the transaction
    return {"on_commit": True}  # elsewhere: after the commit


def place_order(email: str, ship_after: datetime | None = None) -> Order:
    """Store the order, start its watch (first check 3 h later) and send its confirmation."""
    with transaction.atomic():
        order = Order.objects.create(
            email=email, placed_at=datetime.now(UTC), ship_after=ship_after
        )
        tie = with_the_order()
        first_check = order.placed_at + REMIND_AFTER
        order_unshipped.options(at=first_check, **tie).start(order_id=order.id)
        send_confirmation.options(key=f"order:{order.id}", **tie).enqueue(order.id)
        if email.endswith(".invalid"):  # e.g. a check that runs after the jobs were enqueued
            raise ValueError(f"cannot deliver to {email}")
    return order


def ship_order(order_id: int) -> bool:
    """Mark the order shipped and stop its watch; False if no watch was running."""
    Order.objects.filter(id=order_id).update(shipped_at=datetime.now(UTC))
    return order_unshipped.stop(order_id=order_id)
