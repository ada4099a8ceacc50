"""One typed job model: ``Job[R].result()``, ``JobInfo[R]`` as a msgspec Struct, and
``app.jobs(before=)`` paging (issue 27 item 4)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime
from typing import Any

import msgspec
import pytest

import duly

pytestmark = pytest.mark.timeout(60)


def test_result_is_what_the_task_returned(
    app: duly.App, run_burst: Callable[..., duly.Worker]
) -> None:
    @app.task(name="t.add")
    def add(a: int, b: int) -> int:
        return a + b

    @app.task(name="t.when")
    async def when(iso: str) -> datetime:
        return datetime.fromisoformat(iso)

    job = add.enqueue(2, 3)
    later = when.enqueue("2030-01-02T03:04:05+00:00")
    run_burst(app)
    assert job.result(timeout=10) == 5
    assert later.result() == datetime.fromisoformat("2030-01-02T03:04:05+00:00")
    assert asyncio.run(later.result_async()) == later.result()


def test_result_of_a_failed_or_cancelled_job_raises_job_failed(
    app: duly.App, run_burst: Callable[..., duly.Worker]
) -> None:
    @app.task(name="t.boom", retries=0)
    def boom() -> int:
        raise ValueError("nope")

    failing = boom.enqueue()
    cancelled = boom.options(delay=3600).enqueue()
    assert app.cancel(cancelled.id)
    run_burst(app)
    with pytest.raises(duly.JobFailed, match=r"failed: ValueError: nope") as failed:
        failing.result()
    assert failed.value.info.status == "failed" and failed.value.info.id == failing.id
    with pytest.raises(duly.JobFailed, match="cancelled"):
        cancelled.result()


def test_result_of_an_unfinished_job_times_out(app: duly.App) -> None:
    @app.task(name="t.later")
    def later() -> None:
        return None

    job = later.options(delay=3600).enqueue()
    with pytest.raises(TimeoutError):
        job.result(timeout=0)


def test_job_info_is_one_struct_with_a_status_literal(app: duly.App) -> None:
    @app.task(name="t.one")
    def one(x: int) -> int:
        return x

    info = app.get_job(one.options(key="k:1").enqueue(7).id)
    assert isinstance(info, msgspec.Struct) and isinstance(info, duly.JobInfo)
    assert info.status in duly.STATUSES and info.errors == [] and info.error is None
    encoded = msgspec.json.decode(msgspec.json.encode(info))
    assert set(encoded) == set(info.to_dict()) and encoded["args"] == [7]
    assert info.to_dict()["enqueued_at"] == info.enqueued_at.isoformat()


def test_jobs_pages_with_before(app: duly.App) -> None:
    @app.task(name="t.paged")
    def paged(n: int) -> int:
        return n

    ids = [job.id for job in app.enqueue_many([paged.s(n) for n in range(7)])]
    other = paged.options(key="elsewhere").enqueue(99)
    for where in ({"key": None}, {"task": "t.paged"}):
        seen: list[str] = []
        before: str | None = None
        while True:
            page = app.jobs(limit=3, before=before, **where)  # type: ignore[arg-type]
            assert len(page) <= 3
            seen += [info.id for info in page]
            if len(page) < 3:
                break
            before = page[-1].id
        assert seen == sorted([*ids, other.id], reverse=True), where
    keyed = asyncio.run(_keyed_pages(app))
    assert keyed == [[other.id], []]


async def _keyed_pages(app: duly.App) -> list[list[str]]:
    first = await app.jobs_async(key="elsewhere", limit=1)
    second = await app.jobs_async(key="elsewhere", limit=1, before=first[-1].id)
    await app.aclose()
    return [[i.id for i in first], [i.id for i in second]]


def test_jobs_before_must_be_an_id(app: duly.App) -> None:
    bad: Any = 7
    with pytest.raises(ValueError, match="before must be a job id"):
        app.jobs(before=bad)
