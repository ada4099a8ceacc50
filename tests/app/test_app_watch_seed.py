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

    with pytest.raises(TypeError, match="replace"):
        unshipped.start(order_id=1, replace="yes")
    with pytest.raises(TypeError, match="replace"):
        unshipped.options(replace=1)  # type: ignore[arg-type]
    assert app.jobs(task=unshipped.name) == []
    job = renamed.start(order_id=1, replace=True)  # the function's own argument
    assert app.get_job(job.id).kwargs == {"order_id": 1, "replace": True}  # type: ignore[union-attr]
