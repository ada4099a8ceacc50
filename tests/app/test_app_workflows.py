"""Dependencies (``options(after=...)``) and chains through the public API, with real workers
(PRODUCT §16)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import pytest

import duly

pytestmark = pytest.mark.timeout(60)


@dataclass
class Page:
    url: str
    size: int


def test_a_chain_passes_each_result_to_the_next_step(app: duly.App, run_burst) -> None:
    seen: list[Any] = []

    @app.task(name="t.fetch")
    def fetch(url: str) -> Page:
        return Page(url, len(url))

    @app.task(name="t.parse")
    def parse(page: Page, factor: int = 1) -> int:
        seen.append(page)  # decoded by the parameter's annotation, like any argument
        return page.size * factor

    @app.task(name="t.store")
    def store(total: int, table: str) -> str:
        return f"{table}:{total}"

    @app.task(name="t.notify")
    def notify(tag: str) -> str:
        return tag

    wf = app.chain(fetch.s("abcd"), parse.s(factor=10), store.s(table="pages"), notify.si("x"))
    assert isinstance(wf, duly.Workflow) and len(wf.jobs) == 4
    info = app.get_workflow(wf.id)
    assert info is not None and info.status == "running"
    assert [j.status for j in info.jobs] == ["queued", "scheduled", "scheduled", "scheduled"]
    assert info.jobs[1].after == [wf.jobs[0].id]
    run_burst(app)
    assert seen == [Page("abcd", 4)]
    assert [j.result() for j in wf.jobs] == [Page("abcd", 4), 40, "pages:40", "x"]
    done = app.get_workflow(wf.id)
    assert done is not None and done.status == "succeeded"
    assert [j.id for j in done.jobs] == [j.id for j in wf.jobs]


def test_a_failed_step_cancels_the_rest_and_a_retry_resumes(app: duly.App, run_burst) -> None:
    calls: list[str] = []
    fail = [True]

    @app.task(name="t.first", retries=0)
    def first() -> int:
        calls.append("first")
        if fail[0]:
            raise ValueError("upstream down")
        return 2

    @app.task(name="t.double")
    def double(n: int) -> int:
        calls.append("double")
        return n * 2

    @app.task(name="t.last")
    def last(n: int) -> int:
        calls.append("last")
        return n + 1

    wf = app.chain(first.s(), double.s(), last.s())
    run_burst(app)
    info = app.get_workflow(wf.id)
    assert info is not None and info.status == "failed"
    assert [j.status for j in info.jobs] == ["failed", "cancelled", "cancelled"]
    error = info.jobs[1].error
    assert error is not None and error["type"] == "DependencyFailed"
    assert wf.jobs[0].id in error["message"]
    with pytest.raises(duly.JobFailed):
        wf.jobs[2].result(timeout=1)
    fail[0] = False
    assert app.retry(wf.jobs[0].id)
    assert app.get_workflow(wf.id).status == "running"  # type: ignore[union-attr]
    run_burst(app)
    assert calls == ["first", "first", "double", "last"]
    assert wf.jobs[2].result() == 5
    assert app.get_workflow(wf.id).status == "succeeded"  # type: ignore[union-attr]


def test_after_waits_for_jobs_and_groups(app: duly.App, run_burst) -> None:
    order: list[str] = []

    @app.task(name="t.part")
    def part(n: int) -> int:
        order.append(f"part{n}")
        return n

    @app.task(name="t.report")
    def report(day: str) -> str:
        order.append("report")
        return day

    j1 = part.enqueue(1)
    g = app.group([part.s(2), part.s(3)])
    j = report.options(after=[j1, g]).enqueue("2026-12-01")
    info = j.info()
    assert info is not None and info.status == "scheduled"
    assert info.after == [j1.id, *[m.id for m in g.jobs]]
    run_burst(app)
    assert order[-1] == "report" and sorted(order[:-1]) == ["part1", "part2", "part3"]
    assert j.result() == "2026-12-01"
    # A dependency that already succeeded counts as done.
    again = report.options(after=[j1]).enqueue("later")
    assert again.info().status == "queued"  # type: ignore[union-attr]


def test_async_twins(app: duly.App) -> None:
    @app.task(name="t.one")
    def one() -> int:
        return 1

    @app.task(name="t.plus")
    def plus(n: int) -> int:
        return n + 1

    async def main() -> None:
        wf = await app.chain_async(one.s(), plus.s())
        waiting = await plus.options(after=[wf.jobs[1]]).enqueue_async(0)
        info = await app.get_workflow_async(wf.id)
        assert info is not None and [j.status for j in info.jobs] == ["queued", "scheduled"]
        assert (await waiting.info_async()).status == "scheduled"  # type: ignore[union-attr]
        await app.aclose()

    asyncio.run(main())


def test_bad_input_is_refused_and_nothing_is_stored(app: duly.App) -> None:
    @app.task(name="t.two")
    def two(a: int, b: int) -> int:
        return a + b

    ghost = "01" + "Z" * 24
    with pytest.raises(duly.JobNotFound):
        two.options(after=[ghost]).enqueue(1, 2)
    assert app.jobs() == []
    with pytest.raises(TypeError, match="after="):
        two.options(after="not-a-list")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="after="):
        two.options(after=[3])
    with pytest.raises(duly.ConfigurationError, match="after="):
        two.options(after=[ghost], delay=5)
    with pytest.raises(duly.ConfigurationError, match="at least one"):
        app.chain()
    with pytest.raises(duly.ConfigurationError, match="at most 500 steps"):
        app.chain(*[two.si(1, 2) for _ in range(501)])
    with pytest.raises(TypeError, match="signatures"):
        app.chain(two)  # type: ignore[arg-type]
    # The second step takes the first one's result, so it needs one argument less.
    with pytest.raises(duly.ArgumentsMismatch, match="previous step"):
        app.chain(two.s(1, 2), two.s(1, 2))
    with pytest.raises(ValueError, match="after="):
        app.group([two.options(after=[ghost]).s(1, 2)])
    assert app.jobs() == []
    assert app.get_workflow("nope") is None
    assert app.get_workflow(ghost + "w") is None


def test_nothing_may_wait_deeper_than_a_full_chain(app: duly.App) -> None:
    @app.task(name="t.step")
    def step() -> int:
        return 1

    full = app.chain(*[step.si() for _ in range(500)])
    with pytest.raises(duly.ConfigurationError, match="501 jobs deep"):
        step.options(after=[full.jobs[-1]]).enqueue()
    assert len(app.jobs(limit=1000)) == 500
