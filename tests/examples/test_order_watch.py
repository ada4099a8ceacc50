"""examples/order_watch (seed 004, "email if not shipped in 3 h, escalate after 6 h") runs end
to end on every backend, with an hour of 0.3 s.

One driver per backend runs the example in a subprocess and prints what happened; the tests
below read that report.
"""

from __future__ import annotations

from typing import Any

import pytest
from example_driver import run_driver
from services import BACKENDS, require_service

HOUR = 0.3

DRIVER = """
import json, threading, time
from datetime import UTC, datetime
import duly.testing
from examples.order_watch import app as ow

app, watch = ow.app, ow.order_unshipped


def wait(condition, timeout=30):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


# 1: ships at once; 2: never ships (and is started three times); 3: ships after the reminder;
# 4: the customer wants it shipped in two days, beyond the watch's horizon of one day
shipped = ow.place_order(1, "ann@example.org")
stopped = [ow.ship_order(1), ow.ship_order(1)]
late = ow.place_order(2, "bo@example.org")
again = [watch.start(order_id=2), watch.options(at=datetime.now(UTC) + ow.HOUR).start(2)]
reminded = ow.place_order(3, "cy@example.org")
held = ow.place_order(4, "di@example.org", ship_after=datetime.now(UTC) + 48 * ow.HOUR)
active = app.watch_history(watch, active=True)

jobs = [late, reminded, held]
runner = threading.Thread(target=duly.testing.run_jobs, args=(app, jobs), kwargs={"poll": 0.05})
runner.start()
try:
    wait(lambda: ow.sent(3) == ["reminder"])
    # ship once the check that sent the reminder is stored (scheduled again): a stop during a
    # running check ends the watch without that check's progress (see the guide, Watches)
    wait(lambda: app.get_job(reminded.id).status == "scheduled")
    shipped_after_reminder = ow.ship_order(3)
finally:
    runner.join(60)

with ow.orders() as db:
    emails = [
        [r["order_id"], r["kind"], r["sent_at"] - r["placed_at"]]
        for r in db.execute(
            "SELECT * FROM emails JOIN orders ON orders.id = order_id ORDER BY emails.rowid"
        )
    ]
rows = lambda history: [
    {k: w.to_dict()[k] for k in ("job_id", "kwargs", "state", "reason", "checks")}
    for w in sorted(history, key=lambda w: w.kwargs["order_id"])
]
print(json.dumps({
    "ids": {"shipped": shipped.id, "late": late.id, "reminded": reminded.id, "held": held.id},
    "stopped": stopped,
    "again": [[j.id, j.deduplicated] for j in again],
    "late_jobs": len(app.jobs(key=watch.key_of((), {"order_id": 2}))),
    "active_before": rows(active),
    "shipped_after_reminder": shipped_after_reminder,
    "emails": emails,
    "history": rows(app.watch_history(watch)),
    "active_after": rows(app.watch_history(watch, active=True)),
}))
"""


@pytest.fixture(scope="module", params=BACKENDS)
def report(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """What the driver saw on one backend."""
    backend = request.param
    if backend != "sqlite":
        require_service(backend)
    tmp_path = tmp_path_factory.mktemp(f"orders-{backend}")
    return run_driver(DRIVER, backend, tmp_path, {"ORDER_WATCH_HOUR": str(HOUR)})


pytestmark = pytest.mark.timeout(100)


def _row(report: Any, order_id: int) -> dict[str, Any]:
    [row] = [r for r in report["history"] if r["kwargs"] == {"order_id": order_id}]
    return row


def test_a_shipped_order_gets_no_email(report: Any) -> None:
    assert report["stopped"] == [True, False]  # the second ship finds no watch running
    row = _row(report, 1)
    assert row["job_id"] == report["ids"]["shipped"]
    assert (row["state"], row["reason"], row["checks"]) == ("stopped", "stopped", 0)
    assert [e for e in report["emails"] if e[0] == 1] == []


def test_an_unshipped_order_is_reminded_then_escalated_then_done(report: Any) -> None:
    emails = [e for e in report["emails"] if e[0] == 2]
    assert [kind for _, kind, _ in emails] == ["reminder", "escalation"]
    (_, _, reminded_after), (_, _, escalated_after) = emails
    assert 3 * HOUR - 0.01 <= reminded_after < escalated_after
    assert escalated_after >= 6 * HOUR - 0.01
    row = _row(report, 2)
    assert (row["state"], row["reason"], row["checks"]) == ("done", None, 2)


def test_an_order_shipped_after_the_reminder_is_not_escalated(report: Any) -> None:
    assert report["shipped_after_reminder"] is True
    assert [e[1] for e in report["emails"] if e[0] == 3] == ["reminder"]
    row = _row(report, 3)
    assert (row["state"], row["reason"], row["checks"]) == ("stopped", "stopped", 1)


def test_starting_an_order_twice_does_not_double_it(report: Any) -> None:
    late = report["ids"]["late"]
    assert report["again"] == [[late, True], [late, True]]
    assert report["late_jobs"] == 1
    # while watching: one row per order, its first check due 3 h after placement
    assert [(r["kwargs"]["order_id"], r["state"]) for r in report["active_before"]] == [
        (2, "watching"),
        (3, "watching"),
        (4, "watching"),
    ]


def test_guard_reasons_show_up_in_history(report: Any) -> None:
    row = _row(report, 4)
    assert (row["state"], row["checks"]) == ("ended", 1)
    assert row["reason"] == f"horizon: the next check is more than {24 * HOUR:g}s after the start"
    assert [e for e in report["emails"] if e[0] == 4] == []
    assert len(report["history"]) == 4
    assert report["active_after"] == []
