"""Enqueue and look up: ``task.enqueue``, ``options(...)``, ``JobInfo``, ``app.jobs``,
``enqueue_many`` and the async twins (PRODUCT §0, §2, §5 first bullet)."""

from __future__ import annotations

import asyncio
import threading
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

import duly

pytestmark = pytest.mark.timeout(60)

JOB_INFO_FIELDS = (
    "id",
    "task",
    "queue",
    "args",
    "kwargs",
    "status",
    "attempts",
    "max_attempts",
    "key",
    "priority",
    "enqueued_at",
    "scheduled_for",
    "started_at",
    "finished_at",
    "result",
    "error",
    "worker",
)


def aware_utc(value: Any) -> bool:
    return (
        isinstance(value, datetime)
        and value.tzinfo is not None
        and value.utcoffset() == timedelta(0)
    )


def status_of(app: duly.App, job_id: str) -> str | None:
    info = app.get_job(job_id)
    return None if info is None else info.status


def test_enqueue_returns_a_handle_with_a_time_ordered_str_id(app: duly.App) -> None:
    @app.task(name="t.noop")
    def noop() -> None:
        return None

    jobs = [noop.enqueue() for _ in range(20)]
    assert all(isinstance(job, duly.Job) for job in jobs)
    ids = [job.id for job in jobs]
    assert all(isinstance(i, str) and i for i in ids)
    assert len(set(ids)) == 20
    assert ids == sorted(ids), "ids must be time-ordered"
    assert not any(job.deduplicated for job in jobs)


def test_job_info_every_field_and_status_progression(app: duly.App, worker_thread, wait) -> None:
    release = threading.Event()

    @app.task(name="t.add", retries=2, priority=3)
    def add(a: int, b: int, *, c: int = 0) -> int:
        release.wait(20)
        return a + b + c

    before = datetime.now(UTC)
    job = add.options(key="team:7").enqueue(1, 2, c=3)
    after = datetime.now(UTC)
    info = app.get_job(job.id)
    assert isinstance(info, duly.JobInfo)
    for name in JOB_INFO_FIELDS:
        assert hasattr(info, name), name
    assert info.id == job.id
    assert info.task == "t.add"
    assert info.queue == "default"
    assert info.args == [1, 2]
    assert info.kwargs == {"c": 3}
    assert info.status == "queued"
    assert info.attempts == 0
    assert info.max_attempts == 3
    assert info.key == "team:7"
    assert info.priority == 3
    assert aware_utc(info.enqueued_at)
    assert before - timedelta(seconds=1) <= info.enqueued_at <= after + timedelta(seconds=1)
    assert info.scheduled_for is None or aware_utc(info.scheduled_for)
    assert info.started_at is None
    assert info.finished_at is None
    assert info.result is None
    assert info.error is None
    assert info.worker is None
    assert not info.finished

    with worker_thread(app) as worker:
        running = wait(
            lambda: (i := app.get_job(job.id)) is not None and i.status == "running" and i
        )
        assert running.attempts == 1
        assert aware_utc(running.started_at)
        assert running.started_at >= info.enqueued_at
        assert running.finished_at is None
        assert running.worker == worker.id
        release.set()
        done = wait(lambda: (i := app.get_job(job.id)) is not None and i.finished and i)

    assert done.status == "succeeded"
    assert done.result == 6
    assert done.error is None
    assert done.attempts == 1
    assert done.worker == worker.id
    assert aware_utc(done.started_at) and aware_utc(done.finished_at)
    assert done.enqueued_at <= done.started_at <= done.finished_at
    assert done.finished_at <= datetime.now(UTC) + timedelta(seconds=1)
    assert done.finished


def test_get_job_of_an_unknown_id_is_none(app: duly.App) -> None:
    assert app.get_job("01ARZ3NDEKTSV4RRFFQ69G5FAV") is None
    assert app.get_job("not-an-id-at-all") is None


def test_delay_schedules_the_job_and_it_runs_when_due(app: duly.App, worker_thread, wait) -> None:
    @app.task(name="t.later")
    async def later() -> str:
        return "ran"

    job = later.options(delay=1.0).enqueue()
    info = app.get_job(job.id)
    assert info is not None
    assert info.status == "scheduled"
    assert aware_utc(info.scheduled_for)
    assert abs((info.scheduled_for - info.enqueued_at).total_seconds() - 1.0) < 0.01
    # a timedelta works too
    job2 = later.options(delay=timedelta(seconds=1)).enqueue()
    assert status_of(app, job2.id) == "scheduled"

    with worker_thread(app):
        wait(lambda: all(status_of(app, j.id) == "succeeded" for j in (job, job2)), 10)
    for j in (job, job2):
        done = app.get_job(j.id)
        assert done is not None
        assert done.status == "succeeded"
        assert done.result == "ran"
        assert done.started_at >= done.scheduled_for
        # due jobs start within about a second of their time (a 1 s promotion budget plus
        # generous slack for a loaded test machine)
        assert done.started_at - done.scheduled_for < timedelta(seconds=3)


def test_at_schedules_at_that_instant(app: duly.App) -> None:
    @app.task(name="t.at")
    def at_task() -> None:
        return None

    when = datetime.now(UTC).replace(microsecond=0) + timedelta(hours=1)
    job = at_task.options(at=when).enqueue()
    info = app.get_job(job.id)
    assert info is not None
    assert info.status == "scheduled"
    assert abs((info.scheduled_for - when).total_seconds()) < 0.001

    # another timezone means the same instant
    tokyo = when.astimezone(timezone(timedelta(hours=9)))
    info2 = app.get_job(at_task.options(at=tokyo).enqueue().id)
    assert info2 is not None
    assert abs((info2.scheduled_for - when).total_seconds()) < 0.001
    assert aware_utc(info2.scheduled_for)

    # a time already past is due now
    past = app.get_job(at_task.options(at=when - timedelta(days=1)).enqueue().id)
    assert past is not None
    assert past.status == "queued"


def test_priority_higher_runs_first(app: duly.App, run_burst) -> None:
    order: list[int] = []

    @app.task(name="t.record")
    def record(n: int) -> None:
        order.append(n)

    record.options(priority=-5).enqueue(-5)
    record.enqueue(0)
    record.options(priority=10).enqueue(10)
    record.options(priority=1000).enqueue(1000)
    record.options(priority=-1000).enqueue(-1000)
    run_burst(app, concurrency=1)
    assert order == [1000, 10, 0, -5, -1000]


def test_fifo_within_one_priority(app: duly.App, run_burst) -> None:
    order: list[int] = []

    @app.task(name="t.record")
    def record(n: int) -> None:
        order.append(n)

    for n in range(10):
        record.enqueue(n)
    run_burst(app, concurrency=1)
    assert order == list(range(10))


def test_task_level_priority_and_queue_defaults(app: duly.App) -> None:
    @app.task(name="t.urgent", queue="urgent", priority=7)
    def urgent() -> None:
        return None

    info = app.get_job(urgent.enqueue().id)
    assert info is not None
    assert (info.queue, info.priority) == ("urgent", 7)
    info = app.get_job(urgent.options(priority=-1, queue="slow").enqueue().id)
    assert info is not None
    assert (info.queue, info.priority) == ("slow", -1)


def test_queue_option_routes_the_job(app: duly.App, run_burst) -> None:
    @app.task(name="t.where")
    def where() -> str:
        return duly.current_job().queue

    on_default = where.enqueue()
    on_other = where.options(queue="other").enqueue()
    info = app.get_job(on_other.id)
    assert info is not None and info.queue == "other"

    run_burst(app)  # queues=["default"]
    assert status_of(app, on_default.id) == "succeeded"
    assert status_of(app, on_other.id) == "queued"

    run_burst(app, queues=["other"])
    done = app.get_job(on_other.id)
    assert done is not None
    assert (done.status, done.result) == ("succeeded", "other")


def test_key_indexes_jobs_newest_first(app: duly.App) -> None:
    @app.task(name="t.op")
    def op(n: int) -> None:
        return None

    team7 = [op.options(key="team:7").enqueue(n) for n in range(5)]
    others = [op.options(key="team:8").enqueue(n) for n in range(3)]
    op.enqueue(99)
    found = app.jobs(key="team:7")
    assert [info.id for info in found] == [job.id for job in reversed(team7)]
    assert all(info.key == "team:7" for info in found)
    assert [i.id for i in app.jobs(key="team:8")] == [j.id for j in reversed(others)]
    assert app.jobs(key="team:9") == []
    assert [i.id for i in app.jobs(key="team:7", limit=2)] == [team7[4].id, team7[3].id]


def test_jobs_filters_by_status_task_and_limit(app: duly.App, run_burst) -> None:
    @app.task(name="t.good")
    def good(n: int) -> int:
        return n

    @app.task(name="t.bad", retries=0)
    def bad(n: int) -> int:
        raise ValueError(f"bad {n}")

    goods = [good.enqueue(n) for n in range(3)]
    bads = [bad.enqueue(n) for n in range(2)]
    run_burst(app)
    later = good.options(delay=3600).enqueue(100)

    everything = app.jobs()
    assert [i.id for i in everything] == [later.id, *[j.id for j in reversed(goods + bads)]]
    failed = app.jobs(status="failed")
    assert [i.id for i in failed] == [j.id for j in reversed(bads)]
    assert all(i.status == "failed" for i in failed)
    assert [i.id for i in app.jobs(status="succeeded")] == [j.id for j in reversed(goods)]
    assert [i.id for i in app.jobs(status="scheduled")] == [later.id]
    assert [i.id for i in app.jobs(task="t.bad")] == [j.id for j in reversed(bads)]
    assert [i.id for i in app.jobs(task="t.good", status="succeeded", limit=2)] == [
        goods[2].id,
        goods[1].id,
    ]
    assert app.jobs(task="t.nothing") == []
    assert len(app.jobs(limit=1)) == 1


def test_async_twins(app: duly.App, run_burst) -> None:
    @app.task(name="t.mul")
    async def mul(a: int, b: int) -> int:
        return a * b

    async def produce() -> list[duly.Job]:
        jobs = [await mul.enqueue_async(2, 3)]
        jobs.append(await mul.options(key="k:1").enqueue_async(4, b=5))
        jobs += await app.enqueue_many_async([mul.s(6, 7), mul.s(8, 9)])
        info = await app.get_job_async(jobs[1].id)
        assert info is not None
        assert (info.status, info.args, info.kwargs, info.key) == ("queued", [4], {"b": 5}, "k:1")
        assert await app.get_job_async("01ARZ3NDEKTSV4RRFFQ69G5FAV") is None
        listed = await app.jobs_async(key="k:1")
        assert [i.id for i in listed] == [jobs[1].id]
        await app.aclose()
        return jobs

    jobs = asyncio.run(produce())
    run_burst(app)

    async def check() -> list[Any]:
        try:
            return [(await job.info_async()).result for job in jobs]  # type: ignore[union-attr]
        finally:
            await app.aclose()

    assert asyncio.run(check()) == [6, 20, 42, 72]


def test_sync_calls_work_inside_a_running_event_loop(app: duly.App) -> None:
    @app.task(name="t.noop")
    def noop() -> None:
        return None

    async def inside() -> str:
        return noop.enqueue().id  # a sync call from async code must not deadlock

    job_id = asyncio.run(inside())
    assert status_of(app, job_id) == "queued"


def test_enqueue_many_in_order(app: duly.App, run_burst) -> None:
    @app.task(name="t.add")
    def add(a: int, b: int) -> int:
        return a + b

    @app.task(name="t.neg")
    async def neg(a: int) -> int:
        return -a

    assert app.enqueue_many([]) == []
    sigs = [add.s(1, 2), neg.s(5), add.options(key="bulk", priority=2).s(3, b=4)]
    jobs = app.enqueue_many(sigs)
    assert len(jobs) == 3 and len({j.id for j in jobs}) == 3
    infos = [app.get_job(j.id) for j in jobs]
    assert [(i.task, i.args, i.kwargs) for i in infos if i] == [
        ("t.add", [1, 2], {}),
        ("t.neg", [5], {}),
        ("t.add", [3], {"b": 4}),
    ]
    assert infos[2] is not None and (infos[2].key, infos[2].priority) == ("bulk", 2)
    run_burst(app)
    assert [j.info().result for j in jobs] == [3, -5, 7]  # type: ignore[union-attr]


def test_enqueue_many_validates_all_before_storing_any(app: duly.App) -> None:
    @app.task(name="t.add")
    def add(a: Any, b: Any) -> Any:
        return a + b

    with pytest.raises(TypeError, match="b"):
        app.enqueue_many([add.s(1, 2), add.s(3, 4), add.s(5, b=object())])
    assert app.jobs() == []
    with pytest.raises(duly.PayloadTooLarge):
        app.enqueue_many([add.s(1, 2), add.s("x" * (2 * 1024 * 1024), 1)])
    assert app.jobs() == []
    with pytest.raises(TypeError):
        app.enqueue_many([add.s(1, 2), (add, 1, 2)])  # type: ignore[list-item]
    assert app.jobs() == []


def test_enqueue_many_rejects_another_apps_signature(make_app) -> None:
    app, other = make_app(), make_app()

    @app.task(name="t.a")
    def a() -> None:
        return None

    @other.task(name="t.b")
    def b() -> None:
        return None

    with pytest.raises(ValueError, match="another App"):
        app.enqueue_many([a.s(), b.s()])
    assert app.jobs() == []


def test_a_task_called_directly_runs_here(app: duly.App) -> None:
    @app.task(name="t.add")
    def add(a: int, b: int) -> int:
        return a + b

    assert add(2, 3) == 5
    assert app.jobs() == []
    assert add.name == "t.add"
    assert app.tasks["t.add"] is add


def test_default_task_name_is_module_and_qualname(app: duly.App) -> None:
    @app.task
    def plain() -> None:
        return None

    assert plain.name == f"{__name__}.test_default_task_name_is_module_and_qualname.<locals>.plain"
    info = app.get_job(plain.enqueue().id)
    assert info is not None and info.task == plain.name


def test_burst_worker_does_not_wait_for_jobs_not_yet_due(app: duly.App, run_burst) -> None:
    """``burst`` "stops the worker once no job is queued, due or running here" (Worker
    docstring; ``duly worker --burst``: "Exit once no job is queued, due or running"): a job
    due in an hour is none of these, so the worker must not wait an hour for it."""

    @app.task(name="t.noop")
    def noop() -> None:
        return None

    now_job = noop.enqueue()
    later = noop.options(delay=3600).enqueue()
    run_burst(app, limit=10)
    assert status_of(app, now_job.id) == "succeeded"
    assert status_of(app, later.id) == "scheduled"
