"""The tasks of the upgrade test, written against the API of duly 0.1.0 (the last release) so
that the same module runs under it (``old_side.py``) and under HEAD (``test_upgrade.py``).

Every task notes its run in ``marks`` (a directory): the test checks what ran, not only the
statuses the backend reports.
"""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path

import duly

#: The periodic task's period: long, so only the tick the old side enqueued is due.
PERIOD = 600.0


def make_app(url: str, namespace: str, marks: Path, clock: duly.Clock | None = None) -> duly.App:
    """The App of the upgrade test, on ``url`` / ``namespace``."""
    app = duly.App(url, namespace=namespace, clock=clock)

    def mark(name: str) -> None:
        (marks / name).touch()

    @app.task(name="up.plain")
    def plain(n: int) -> int:
        mark(f"plain-{n}")
        return n * 2

    @app.task(name="up.flaky", queue="prep", retries=2, backoff=duly.Backoff(base=1.0, cap=1.0))
    def flaky(n: int) -> int:
        if duly.current_job().attempt == 1:
            mark("flaky-started")
            time.sleep(0.2)
            raise RuntimeError("the first attempt fails")
        mark(f"flaky-{n}")
        return n

    @app.task(name="up.unique", unique="{n}")
    def unique(n: int) -> int:
        mark(f"unique-{n}")
        return n

    @app.task(name="up.hold", queue="gate", mutex="m")
    def hold(n: int) -> int:
        mark(f"hold-{n}")
        return n

    @app.task(name="up.gated", queue="gate", mutex="m")
    def gated(n: int) -> int:
        mark(f"gated-{n}")
        return n

    @app.periodic(every=PERIOD, name="up.tick")
    def tick() -> None:
        mark("tick")

    @app.watch(name="up.shipped", max_checks=5, horizon=timedelta(hours=1))
    def shipped(order: int) -> timedelta | None:
        """Two checks: the first asks for another one a second later, the second is done."""
        if (marks / f"shipped-{order}-1").exists():
            mark(f"shipped-{order}-2")
            return None
        mark(f"shipped-{order}-1")
        return timedelta(seconds=1)

    return app
