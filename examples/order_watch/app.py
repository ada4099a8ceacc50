"""'Email if an order has not shipped within 3 h, escalate after 6 h' (seed 004) in duly.

The article replaces a cron that scans every unshipped order with ``at``-style future checks:
one row per order, due at a given time, whose job says when to check again or that it is done,
with guards (too many checks, a next time in the past or too far ahead, a timeout), a history,
slots, and no double firing. That is ``@app.watch``:

- ``place_order`` starts ``order_unshipped`` for the order, first check at placed + 3 h;
- the check reads the order by its key: shipped, nothing to do (``None``: done); otherwise
  it sends the reminder and asks to be checked again at placed + 6 h, when it escalates and
  is done;
- ``ship_order`` stops the watch, so a shipped order costs no further check;
- starting an order's watch twice returns the watch already running (one job per order);
- ``app.watch_history(order_unshipped)`` keeps every ended watch: state, reason, checks.

Orders and sent emails live in a small SQLite file the example owns (``ORDERS_DB``).
``ORDER_WATCH_HOUR`` (seconds, default 3600) shrinks the hour to try it quickly:
``ORDER_WATCH_HOUR=1 python -m examples.order_watch.app`` (add DULY_URL for Redis/PostgreSQL).
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

import duly
import duly.testing

app = duly.App(os.environ.get("DULY_URL", "sqlite:///order_watch.db"))
ORDERS = os.environ.get("ORDERS_DB", "orders.db")
HOUR = timedelta(seconds=float(os.environ.get("ORDER_WATCH_HOUR", "3600")))
REMIND_AFTER = 3 * HOUR
ESCALATE_AFTER = 6 * HOUR

SCHEMA = """
CREATE TABLE IF NOT EXISTS orders (
    id INTEGER PRIMARY KEY, email TEXT, placed_at REAL, ship_after REAL, shipped_at REAL);
CREATE TABLE IF NOT EXISTS emails (order_id INTEGER, kind TEXT, sent_at REAL);
"""


@contextmanager
def orders() -> Iterator[sqlite3.Connection]:
    """One transaction on the order store (committed unless it raises)."""
    db = sqlite3.connect(ORDERS, timeout=30)
    db.row_factory = sqlite3.Row
    try:
        db.executescript(SCHEMA)
        with db:
            yield db
    finally:
        db.close()


def send_email(order: sqlite3.Row, kind: str) -> None:
    """The mailer (fake): remembers what was sent to whom, and when."""
    with orders() as db:
        db.execute("INSERT INTO emails VALUES (?, ?, ?)", (order["id"], kind, time.time()))


@app.watch(max_checks=3, horizon=24 * HOUR, timeout=timedelta(seconds=30), slot=HOUR / 4)
def order_unshipped(order_id: int) -> datetime | None:
    """One check of an order: None once it shipped or escalated, else when to check again.

    The clock starts at the order's placement, or at the ship date the customer chose if that
    is later. Guards: 3 checks at most, nothing beyond a day after the start; checks run on
    quarter-hour slots (``slot``), like the article's cron."""
    with orders() as db:
        order = db.execute("SELECT * FROM orders WHERE id = ?", (order_id,)).fetchone()
    if order is None or order["shipped_at"] is not None:
        return None
    start = datetime.fromtimestamp(max(order["placed_at"], order["ship_after"] or 0), UTC)
    now = datetime.now(UTC)
    if now < start + REMIND_AFTER:  # not due yet: the customer asked to ship later
        return start + REMIND_AFTER
    if now < start + ESCALATE_AFTER:
        send_email(order, "reminder")
        return start + ESCALATE_AFTER
    send_email(order, "escalation")  # also when the check ran late, past both marks
    return None


def place_order(order_id: int, email: str, ship_after: datetime | None = None) -> duly.Job:
    """Store the order and start its watch: first check 3 h after placement."""
    placed_at = datetime.now(UTC)
    with orders() as db:
        db.execute(
            "INSERT INTO orders VALUES (?, ?, ?, ?, NULL)",
            (order_id, email, placed_at.timestamp(), ship_after and ship_after.timestamp()),
        )
    return order_unshipped.options(at=placed_at + REMIND_AFTER).start(order_id=order_id)


def ship_order(order_id: int) -> bool:
    """Mark the order shipped and stop its watch; False if no watch was running."""
    with orders() as db:
        db.execute("UPDATE orders SET shipped_at = ? WHERE id = ?", (time.time(), order_id))
    return order_unshipped.stop(order_id=order_id)


def sent(order_id: int) -> list[str]:
    """The emails sent about an order, oldest first."""
    with orders() as db:
        rows = db.execute("SELECT kind FROM emails WHERE order_id = ? ORDER BY rowid", (order_id,))
        return [r["kind"] for r in rows]


def main() -> None:
    jobs = [
        place_order(1, "ann@example.org"),
        place_order(2, "bo@example.org"),
        place_order(3, "cy@example.org", ship_after=datetime.now(UTC) + 2 * 24 * HOUR),
    ]
    ship_order(1)
    print("hour:", HOUR, "- checks due at +3 h and +6 h")
    duly.testing.run_jobs(app, jobs, timeout=10 * HOUR.total_seconds() + 30)  # or: duly worker
    for row in app.watch_history(order_unshipped):
        order = row.kwargs["order_id"]
        print(f"order {order}: {row.state} ({row.reason}), {row.checks} checks, {sent(order)}")


if __name__ == "__main__":
    main()
