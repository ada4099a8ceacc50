"""Watches as seed 004 needs them (PRODUCT §17) on every backend: ``start(..., replace=True)``
moves an active watch's next check; each check is kept in its history."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

import duly
from duly.testing import run_jobs

pytestmark = pytest.mark.timeout(60)


def _next(app: duly.App, job_id: str) -> datetime | None:
    info = app.get_job(job_id)
    assert info is not None
    return info.scheduled_for


def test_replace_moves_an_active_watch(app: duly.App) -> None:
    @app.watch()
    def unshipped(order_id: int) -> None:
        return None

    now = datetime.now(UTC).replace(microsecond=0)
    job = unshipped.options(at=now + timedelta(hours=3)).start(order_id=42)
    kept = unshipped.options(at=now + timedelta(hours=1)).start(order_id=42)
    assert kept.id == job.id and _next(app, job.id) == now + timedelta(hours=3)  # as before
    moved = unshipped.options(at=now + timedelta(hours=1)).start(order_id=42, replace=True)
    assert (moved.id, moved.deduplicated) == (job.id, True)
    assert _next(app, job.id) == now + timedelta(hours=1)
    later = unshipped.options(at=now + timedelta(hours=5), replace=True).start(order_id=42)
    assert later.id == job.id and _next(app, job.id) == now + timedelta(hours=5)
    [row] = app.watch_history(unshipped, active=True)
    assert row.next_check == now + timedelta(hours=5)
    # Without a time: the next check is now, and it runs.
    assert unshipped.start(order_id=42, replace=True).id == job.id
    run_jobs(app, [job])
    assert app.get_job(job.id).status == "succeeded"  # type: ignore[union-attr]


def test_replace_starts_a_watch_when_none_is_active(app: duly.App) -> None:
    @app.watch()
    def unshipped(order_id: int) -> None:
        return None

    at = datetime.now(UTC).replace(microsecond=0) + timedelta(hours=2)
    job = unshipped.options(at=at).start(order_id=7, replace=True)
    assert not job.deduplicated and _next(app, job.id) == at


def test_replace_async_and_slot(app: duly.App) -> None:
    @app.watch(slot=timedelta(minutes=15))
    def unshipped(order_id: int) -> None:
        return None

    async def go() -> tuple[duly.Job, duly.Job]:
        first = await unshipped.options(delay=timedelta(hours=3)).start_async(order_id=1)
        at = datetime(2030, 1, 1, 10, 1, tzinfo=UTC)
        again = await unshipped.options(at=at).start_async(order_id=1, replace=True)
        return first, again

    first, again = app.run_sync(go())
    assert again.id == first.id
    assert _next(app, first.id) == datetime(2030, 1, 1, 10, 15, tzinfo=UTC)  # the slot


def test_replace_is_refused_when_not_a_bool_and_an_own_argument_is_kept(app: duly.App) -> None:
    @app.watch()
    def unshipped(order_id: int) -> None:
        return None

    @app.watch()
    def renamed(order_id: int, replace: bool) -> None:
        return None

    assert unshipped.options(replace=True).replace is True  # the typed spelling
    with pytest.raises(TypeError, match="replace"):
        unshipped.start(order_id=1, replace="yes")
    with pytest.raises(TypeError, match="replace"):
        unshipped.options(replace=1)  # type: ignore[arg-type]
    assert app.jobs(task=unshipped.name) == []
    job = renamed.start(order_id=1, replace=True)  # the function's own argument
    assert app.get_job(job.id).kwargs == {"order_id": 1, "replace": True}  # type: ignore[union-attr]


def test_each_check_is_kept_with_its_time_duration_and_outcome(app: duly.App) -> None:
    seen: list[int] = []

    @app.watch()
    def unshipped(order_id: int) -> timedelta | None:
        seen.append(order_id)
        return timedelta(seconds=0.05) if len(seen) < 3 else None

    job = unshipped.start(order_id=42)
    run_jobs(app, [job], poll=0.05)
    [row] = app.watch_history(unshipped)
    assert [c.outcome for c in row.history] == ["again", "again", "done"]
    assert all(c.seconds >= 0 and c.at.tzinfo is UTC for c in row.history)
    assert [c.at for c in row.history] == sorted(c.at for c in row.history)
    assert row.history[0].at >= row.started_at and row.checks == 3
    assert row.to_dict()["history"][2]["outcome"] == "done"


def test_the_history_keeps_the_last_100_checks() -> None:
    from duly._records import JobRecord
    from duly._watch import MAX_HISTORY, WatchConfig, WatchRecord, check_outcome

    record = JobRecord("J", "t.w", "default", b"[[],{}]", "running", 1, 1, None, 0, 0.0)
    for n in range(MAX_HISTORY + 20):
        record.started_at = float(n)
        outcome = check_outcome(WatchConfig(), record, timedelta(seconds=1), n + 0.5, 9e9)
        record.result = outcome.result
    history = WatchRecord.from_record(record).history
    assert len(history) == MAX_HISTORY
    assert history[0].at == datetime.fromtimestamp(20.0, UTC) and history[-1].seconds == 0.5


def test_a_timed_out_check_is_recorded_as_such(app: duly.App) -> None:
    import asyncio

    @app.watch(timeout=0.2)
    async def slow(n: int) -> None:
        await asyncio.sleep(5)

    job = slow.start(1)
    run_jobs(app, [job], poll=0.1)
    [row] = app.watch_history(slow)
    assert (row.state, row.reason, row.checks) == ("failed", "timeout", 1)
    [check] = row.history
    assert check.outcome == "timeout" and check.seconds >= 0.2
    assert row.first_check == row.last_check == row.ended_at  # no longer None
    assert check.at <= row.last_check
