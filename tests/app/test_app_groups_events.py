"""Groups and the event stream through the public API, with real workers (PRODUCT §8)."""

from __future__ import annotations

import asyncio
from datetime import UTC
from typing import Any

import pytest

import duly

pytestmark = pytest.mark.timeout(60)


async def collect(app: duly.App, since: str, key: str | None, until: int) -> list[duly.Event]:
    """The events after ``since`` until ``until`` of them were read."""
    events: list[duly.Event] = []
    async for ev in app.events(since=since, key=key):
        events.append(ev)
        if len(events) == until:
            break
    return events


def test_on_complete_runs_once_and_sees_the_summary(app: duly.App, run_burst) -> None:
    seen: list[Any] = []

    @app.task(name="t.step", retries=0)
    def step(n: int) -> int:
        if n == 2:
            raise ValueError("boom")
        return n

    @app.task(name="t.done")
    def done(tag: str) -> str:
        seen.append((tag, duly.current_job().group, duly.current_job().key))
        return tag

    group = app.group([step.s(1), step.s(2), step.s(3)], on_complete=done.s("e9"), key="event:9")
    assert len(group.jobs) == 3
    info = app.get_group(group.id)
    assert info is not None
    assert (info.total, info.pending, info.completed_at, info.callback_job_id) == (3, 3, None, None)
    run_burst(app)
    [(tag, summary, key)] = seen
    assert tag == "e9" and key == "event:9"
    assert isinstance(summary, duly.GroupInfo)
    assert (summary.total, summary.succeeded, summary.failed, summary.pending) == (3, 2, 1, 0)
    info = app.get_group(group.id)
    assert info is not None and info.completed_at is not None
    assert info.completed_at.tzinfo is UTC and info.callback_job_id == group.id
    statuses = [app.get_job(j.id).status for j in group.jobs]  # type: ignore[union-attr]
    assert statuses == ["succeeded", "failed", "succeeded"]
    assert {j.key for j in app.jobs(key="event:9")} == {"event:9"}
    # A failed member is retryable on its own: it fails again, the group counts its new
    # outcome (still one failure) and on_complete does not run again.
    assert app.retry(group.jobs[1].id)
    run_burst(app)
    assert len(seen) == 1
    again = app.get_group(group.id)
    assert again is not None and (again.succeeded, again.failed, again.pending) == (2, 1, 0)
    assert again.completed_at is not None and again.completed_at >= info.completed_at
    assert again.callback_job_id == group.id


def test_a_group_refuses_bad_input_and_stores_nothing(app: duly.App) -> None:
    @app.task(name="t.plain")
    def plain(n: int) -> int:
        return n

    @app.task(name="t.once", unique=True)
    def once(n: int) -> int:
        return n

    other = duly.App("sqlite:///:memory:")

    @other.task(name="t.foreign")
    def foreign() -> None:
        return None

    with pytest.raises(ValueError, match="at least one"):
        app.group([])
    with pytest.raises(TypeError, match="signatures"):
        app.group([plain])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="unique"):
        app.group([plain.s(1), once.s(2)])
    with pytest.raises(ValueError, match="another App"):
        app.group([plain.s(1)], on_complete=foreign.s())
    with pytest.raises(TypeError):
        app.group([plain.s(1, 2)])  # type: ignore[call-arg]
    assert app.jobs() == []
    assert app.get_group("01M8A18634WJ6CZEW4APNZM4D8g") is None
    other.close()


def test_events_follow_each_job_from_enqueue_to_outcome(app: duly.App, run_burst) -> None:
    @app.task(name="t.add")
    def add(a: int, b: int) -> int:
        return a + b

    async def head() -> str:
        return (await (await app.backend()).events.read(None, None, 1))[1]

    since = asyncio.run(head())
    app.close()
    job = add.options(key="order:1").enqueue(1, 2)
    add.enqueue(3, 4)
    run_burst(app)
    events = asyncio.run(collect(app, since, "order:1", 3))
    assert [(e.job_id, e.status) for e in events] == [
        (job.id, "queued"),
        (job.id, "running"),
        (job.id, "succeeded"),
    ]
    assert all(e.key == "order:1" and e.task == "t.add" for e in events)
    assert all(e.at.tzinfo is UTC for e in events)
    everything = asyncio.run(collect(app, since, None, 6))
    assert len({e.job_id for e in everything}) == 2
    assert [int(e.id) for e in everything] == sorted(int(e.id) for e in everything)
    # Resuming after an event gives what followed it.
    rest = asyncio.run(collect(app, events[0].id, "order:1", 2))
    assert rest == events[1:]


def test_a_reader_resuming_from_trimmed_events_is_told(app: duly.App) -> None:
    @app.task(name="t.noop")
    def noop() -> None:
        return None

    async def main() -> None:
        backend = await app.backend()
        _, since = await backend.events.read(None, None, 1)
        await noop.enqueue_async()
        await noop.enqueue_async()
        await backend.purge(app.clock.now(), 100, keep=-3600)  # older than "in an hour"
        with pytest.raises(duly.EventsTrimmed):
            await anext(app.events(since=since))
        await app.aclose()

    asyncio.run(main())


def test_events_refuse_bad_arguments(app: duly.App) -> None:
    with pytest.raises(TypeError, match="since"):
        app.events(since=5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="key"):
        app.events(key=1)  # type: ignore[arg-type]

    async def main() -> None:
        with pytest.raises(ValueError, match="not an event id"):
            await anext(app.events(since="nope"))
        await app.aclose()

    asyncio.run(main())
