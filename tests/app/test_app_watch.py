"""Watches (PRODUCT §6) on every backend: checks until done, one watch per arguments, stop,
the guards with their recorded reasons, slots, past-due checks, and the history."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta

import pytest

import duly
from duly._records import JobRecord
from duly._watch import WatchConfig, check_outcome
from duly.testing import run_jobs

pytestmark = pytest.mark.timeout(60)


def test_watch_checks_until_it_returns_none(app: duly.App) -> None:
    seen: list[int] = []

    @app.watch()
    def order_unshipped(order_id: int) -> timedelta | None:
        seen.append(order_id)
        return timedelta(seconds=0.1) if len(seen) < 3 else None

    job = order_unshipped.start(order_id=42)
    run_jobs(app, [job], poll=0.1)
    assert seen == [42, 42, 42]
    info = app.get_job(job.id)
    assert info is not None and info.status == "succeeded"
    assert info.result["state"] == "done" and info.result["checks"] == 3
    [row] = app.watch_history(order_unshipped)
    assert (row.state, row.reason, row.checks, row.kwargs) == ("done", None, 3, {"order_id": 42})
    assert row.first_check is not None and row.last_check is not None
    assert row.last_check - row.first_check >= timedelta(seconds=0.2 - 0.03)
    assert row.total is not None and row.ended_at is not None
    assert row.to_dict()["state"] == "done"


def test_one_watch_per_arguments(app: duly.App) -> None:
    @app.watch()
    def unshipped(order_id: int) -> None:
        return None

    first = unshipped.options(delay=60).start(order_id=1)
    assert unshipped.start(1).id == first.id
    assert unshipped.start(order_id=1).deduplicated
    other = unshipped.start(order_id=2)
    assert not other.deduplicated
    [active] = [w for w in app.watch_history(unshipped, active=True) if w.job_id == first.id]
    assert active.state == "watching" and active.next_check is not None
    assert app.watch_history(unshipped) == []


def test_stop_ends_the_watch_and_a_new_start_begins_another(app: duly.App) -> None:
    @app.watch()
    def unshipped(order_id: int) -> timedelta:
        return timedelta(hours=1)

    job = unshipped.options(delay=3600).start(order_id=42)
    assert unshipped.stop(order_id=42) is True
    assert unshipped.stop(order_id=42) is False
    assert unshipped.stop(order_id=43) is False
    [row] = app.watch_history(unshipped)
    assert (row.job_id, row.state, row.reason, row.checks) == (job.id, "stopped", "stopped", 0)
    again = unshipped.start(order_id=42)
    assert not again.deduplicated and again.id != job.id


@pytest.mark.parametrize(
    ("guard", "reason"),
    [
        ("max_checks", "max_checks: 2 checks made"),
        ("past", "past: the next check time is in the past"),
        ("horizon", "horizon: the next check is more than 60s after the start"),
    ],
)
def test_guards_end_the_watch_with_a_reason(app: duly.App, guard: str, reason: str) -> None:
    # The horizon is far from the max_checks case's 0.05 s steps, so a loaded machine that runs
    # the second check late still ends that watch by max_checks, not by the horizon.
    @app.watch(max_checks=2, horizon=timedelta(seconds=60))
    def check(mode: str) -> datetime | timedelta:
        if mode == "past":
            return datetime.now(UTC) - timedelta(seconds=5)
        if mode == "horizon":
            return timedelta(seconds=120)
        return timedelta(seconds=0.05)

    job = check.start(guard)
    run_jobs(app, [job], poll=0.1)
    [row] = app.watch_history(check)
    assert (row.state, row.reason) == ("ended", reason)
    assert row.checks == (2 if guard == "max_checks" else 1)
    assert app.get_job(job.id).status == "succeeded"  # type: ignore[union-attr]


def test_a_check_over_its_timeout_ends_the_watch(app: duly.App) -> None:
    @app.watch(timeout=0.2, retries=3)
    async def slow(n: int) -> None:
        await asyncio.sleep(5)

    job = slow.start(1)
    run_jobs(app, [job], poll=0.1)
    info = app.get_job(job.id)
    assert info is not None and (info.status, info.attempts) == ("failed", 1)  # not retried
    [row] = app.watch_history(slow)
    assert (row.state, row.reason, row.checks) == ("failed", "timeout", 1)


def test_a_failing_check_is_retried_then_fails_loudly(app: duly.App) -> None:
    failures: list[str] = []
    app.on_failure(lambda job, error: failures.append(job.id))

    @app.watch(retries=1, backoff=duly.Backoff(base=0.01, cap=0.01))
    def broken(n: int) -> None:
        raise ValueError("upstream down")

    job = broken.start(1)
    run_jobs(app, [job], poll=0.1)
    info = app.get_job(job.id)
    assert info is not None and (info.status, info.attempts) == ("failed", 2)
    assert failures == [job.id]
    [row] = app.watch_history(broken)
    assert (row.state, row.reason) == ("failed", "error: ValueError")


def test_a_wrong_return_type_fails_the_check(app: duly.App) -> None:
    @app.watch(retries=0)
    def wrong(n: int) -> object:
        return 5

    job = wrong.start(1)
    run_jobs(app, [job], poll=0.1)
    info = app.get_job(job.id)
    assert info is not None and info.status == "failed"
    assert info.error is not None and info.error["type"] == "TypeError"


def test_first_check_at_a_time_is_rounded_up_to_the_slot(app: duly.App) -> None:
    @app.watch(slot=timedelta(minutes=15))
    def check(n: int) -> None:
        return None

    at = datetime(2030, 1, 1, 10, 1, 30, tzinfo=UTC)
    job = check.options(at=at).start(1)
    info = app.get_job(job.id)
    assert info is not None and info.status == "scheduled"
    assert info.scheduled_for == datetime(2030, 1, 1, 10, 15, tzinfo=UTC)
    with pytest.raises(ValueError):
        check.options(at=datetime(2030, 1, 1), delay=5)
    with pytest.raises(ValueError):
        check.options(at=datetime(2030, 1, 1)).start(2)


def test_past_due_checks_run_after_downtime(app: duly.App) -> None:
    ran: list[float] = []

    @app.watch()
    def check(n: int) -> None:
        ran.append(time.time())

    job = check.options(delay=0.2).start(1)
    time.sleep(0.5)  # no worker running: the check is past due when one starts
    run_jobs(app, [job], poll=0.1)
    assert len(ran) == 1


def test_bad_watch_settings(app: duly.App) -> None:
    with pytest.raises(ValueError):
        app.watch(max_checks=0)
    with pytest.raises(ValueError):
        app.watch(slot=0)
    with pytest.raises(duly.ConfigurationError):
        app.watch(unique="{n}")(lambda n: None)


def _record(result: bytes | None = None) -> JobRecord:
    return JobRecord(
        id="j",
        task="t",
        queue="default",
        payload=b"{}",
        status="running",
        attempts=1,
        max_attempts=4,
        key=None,
        priority=0,
        enqueued_at=1000.0,
        result=result,
    )


def test_check_outcome_rounds_next_times_up_to_the_slot() -> None:
    config = WatchConfig(slot=900.0)
    outcome = check_outcome(config, _record(), timedelta(seconds=60), 1800.0, 9999.0)
    assert (outcome.kind, outcome.run_at) == ("again", 2700.0)
    exact = check_outcome(config, _record(), timedelta(seconds=900), 1800.0, 9999.0)
    assert exact.run_at == 2700.0  # already on a slot boundary: unchanged
    unslotted = check_outcome(WatchConfig(), _record(), timedelta(seconds=61), 1800.0, 9999.0)
    assert unslotted.run_at == 1861.0
    when = datetime.fromtimestamp(2000.0, UTC)
    assert check_outcome(config, _record(), when, 1800.0, 9999.0).run_at == 2700.0
    with pytest.raises(TypeError):
        check_outcome(config, _record(), datetime(2030, 1, 1), 1800.0, 9999.0)  # naive
