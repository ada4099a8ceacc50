"""Make the dashboard screenshots of the docs (docs/images/dashboard-*.png).

    .venv/bin/python docs/images/screenshots.py            # SQLite in a temporary folder
    DULY_URL=redis://127.0.0.1:6379/0 .venv/bin/python docs/images/screenshots.py
    .venv/bin/python docs/images/screenshots.py --all /tmp/shots   # every page, elsewhere

It fills an App with half an hour of a small shop's jobs (run with a clock set back minute by
minute, so the overview's charts have a history), serves ``app.asgi()`` with uvicorn, keeps a
worker running, and photographs each page in headless Chromium (the browser tests' harness:
``tests/dashboard/served.py``).
"""

from __future__ import annotations

import random
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any
from uuid import uuid4

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "dashboard"))

from served import CHROMIUM_ARGS, chromium_path, in_thread, serve, worker_thread  # noqa: E402

import duly  # noqa: E402

OUT = Path(__file__).resolve().parent
ADMIN = "screenshot-admin-token-0123456789"
MINUTES = 30


class ShiftedClock:
    """The wall clock minus ``back`` seconds (to write a past half hour)."""

    def __init__(self) -> None:
        self.back = 0.0

    def now(self) -> float:
        return time.time() - self.back


class CardDeclinedError(Exception):
    """The payment provider said no."""


def shop(app: duly.App) -> None:
    """The demo shop's tasks."""

    @app.task(name="shop.send_receipt", queue="emails")
    def send_receipt(user: str, order_id: int) -> str:
        return f"receipt for order {order_id} sent to {user}"

    def provider_charge(amount: int, card: str) -> None:
        if amount % 7 == 0:
            raise CardDeclinedError(f"card ending {card[-4:]} declined for {amount / 100:.2f} EUR")

    @app.task(name="shop.charge_card", queue="payments", retries=2, secret=("card_token",))
    def charge_card(order_id: int, amount: int, card_token: str) -> dict[str, int]:
        provider_charge(amount, card_token)
        return {"order_id": order_id, "charged": amount}

    @app.task(name="users.rebuild_profile")
    def rebuild_profile(user: str) -> None:
        time.sleep(0.01)

    @app.task(name="links.sync_link", retries=1)
    def sync_link(link_id: int) -> None:
        if link_id % 11 == 0:
            raise ConnectionError(f"upstream closed the connection for link {link_id}")

    @app.task(name="reports.export", queue="reports")
    def export(report: str) -> None:
        time.sleep(0.01 if report.startswith("old") else 20)

    @app.periodic(cron="0 3 * * *", name="reports.nightly")
    def nightly() -> None:
        return None

    @app.periodic(every=300, name="billing.reconcile")
    def reconcile() -> None:
        return None

    @app.watch(name="orders.unshipped", max_checks=12)
    def unshipped(user: str, order_id: int) -> timedelta:
        return timedelta(minutes=30)

    app.freshness("profiles", sync=lambda scope, full: None, max_staleness=timedelta(minutes=10))


def fill(url: str, namespace: str) -> None:
    """Half an hour of history, minute by minute, through a clock set back."""
    clock = ShiftedClock()
    app = duly.App(url, namespace=namespace, clock=clock)
    shop(app)
    rng = random.Random(7)
    t = app.tasks
    for minute in range(MINUTES, 0, -1):
        clock.back = minute * 60
        wave = 8 + int(6 * abs(((minute % 12) - 6) / 6))
        sigs = [
            t["shop.charge_card"].s(
                order_id=1000 + minute * 10 + i,
                amount=rng.randrange(900, 9900),
                card_token="tok_4242424242424242",
            )
            for i in range(wave)
        ]
        sigs += [
            t["shop.send_receipt"].s(
                user=f"user:{rng.randrange(1, 40)}", order_id=1000 + minute * 10 + i
            )
            for i in range(wave)
        ]
        sigs += [t["links.sync_link"].s(link_id=rng.randrange(1, 200)) for _ in range(wave // 2)]
        app.enqueue_many(sigs)
        worker = app.worker(
            queues=["default", "emails", "payments", "reports"],
            burst=True,
            install_signal_handlers=False,
            poll=0.02,
        )
        in_thread(worker.run, app)
    app.close()


def present(url: str, namespace: str) -> duly.App:
    """The live App: user:7's story, work waiting, a group, a watch, a freshness."""
    app = duly.App(url, namespace=namespace)
    shop(app)
    t = app.tasks
    # Work waiting: a queue no worker here consumes, and long reports (three run at once).
    app.enqueue_many(
        [t["shop.send_receipt"].s(user=f"user:{i}", order_id=5000 + i) for i in range(37)]
    )
    app.enqueue_many([t["reports.export"].s(report=f"r{i}") for i in range(12)])
    t["users.rebuild_profile"].options(key="user:7").enqueue(user="user:7")
    t["shop.send_receipt"].options(key="user:7").enqueue(user="user:7", order_id=4242)
    t["shop.charge_card"].options(key="user:7").enqueue(
        order_id=4242, amount=4900, card_token="tok_4000000000000002"
    )
    t["orders.unshipped"].options(delay=timedelta(minutes=30)).start(user="user:7", order_id=4242)
    t["orders.unshipped"].options(delay=timedelta(minutes=45)).start(user="user:12", order_id=4250)
    for scope in ("user:7", "user:12", "user:31"):
        app.mirrors["profiles"].check(scope)
    sigs = [t["links.sync_link"].s(link_id=i) for i in range(300, 320)]
    app.group(sigs, key="batch:links-0300", on_complete=t["reports.export"].s(report="old-batch"))
    return app


def group_id(app: duly.App) -> str:
    """The demo group's id (its callback job has it)."""
    [callback] = app.jobs(key="batch:links-0300", task="reports.export", limit=1)
    return callback.id


def main(argv: list[str]) -> None:
    every = "--all" in argv
    out = Path(next((a for a in argv if not a.startswith("-")), OUT))
    out.mkdir(parents=True, exist_ok=True)
    chromium = chromium_path()
    if chromium is None:
        sys.exit("no Chromium: apt-get install chromium")
    import os

    url = os.environ.get("DULY_URL") or f"sqlite:///{tempfile.mkdtemp()}/shop.db"
    namespace = f"shots{uuid4().hex[:8]}"
    fill(url, namespace)
    app = present(url, namespace)
    from playwright.sync_api import sync_playwright

    try:
        queues = ["default", "payments", "reports"]
        with worker_thread(app, queues=queues, concurrency=3, name="web-1:4711", grace=0.5):
            time.sleep(1.5)
            with serve(app.asgi(admin_tokens=[ADMIN])) as base, sync_playwright() as p:
                browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
                page = browser.new_page(
                    viewport={"width": 1360, "height": 860}, device_scale_factor=1
                )
                page.goto(f"{base}/login?token={ADMIN}")
                failed = app.jobs(status="failed", task="shop.charge_card", limit=1)[0]
                shots: list[tuple[str, str, str]] = [
                    ("overview", "/", "#chart-outcomes svg"),
                    ("jobs", "/jobs", "#job-list table"),
                    ("job", f"/jobs/{failed.id}", "#job-errors"),
                    ("key", "/key/user:7", "#key-scopes .scope"),
                    ("workers", "/workers", "table.grid"),
                    ("queues", "/queues", "table.grid"),
                ]
                if every:
                    shots += [
                        ("periodic", "/periodic", "table.grid"),
                        ("watches", "/watches", "table.grid"),
                        ("freshness", "/freshness", "table.grid"),
                        ("scopes", "/freshness/profiles", "table.grid"),
                        ("group", f"/groups/{group_id(app)}", "#group .card"),
                        ("failed", "/jobs?status=failed", "#bulk-retry"),
                    ]
                for name, path, ready in shots:
                    page.goto(base + path)
                    page.wait_for_selector(ready)
                    page.wait_for_timeout(300)
                    if name == "job":
                        page.locator("#job-errors details").first.evaluate("d => d.open = true")
                    target = out / f"dashboard-{name}.png"
                    page.screenshot(path=str(target), full_page=name in ("job", "key"))
                    print(target)
                browser.close()
    finally:
        clean: Any = duly.App(url, namespace=namespace)

        async def drop() -> None:
            await (await clean.backend()).drop()

        in_thread(drop, clean)
        clean.close()
        app.close()


if __name__ == "__main__":
    main(sys.argv[1:])
