"""Groups as seed 001 uses them (PRODUCT §17), through the public API on every backend:
``app.group(..., id=)`` is idempotent, and ``GroupInfo`` counts each member's current outcome."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import duly

pytestmark = pytest.mark.timeout(120)


def test_a_group_with_an_id_is_stored_once(app: duly.App) -> None:
    @app.task(name="t.mail")
    def mail(n: int) -> int:
        return n

    @app.task(name="t.done")
    def done() -> None:
        return None

    g = app.group([mail.s(1), mail.s(2)], on_complete=done.s(), id="obs-event:9")
    assert (g.id, g.deduplicated) == ("obs-event:9", False)
    again = app.group([mail.s(1), mail.s(2), mail.s(3)], on_complete=done.s(), id="obs-event:9")
    assert (again.id, again.deduplicated) == ("obs-event:9", True)
    assert [j.id for j in again.jobs] == [j.id for j in g.jobs]
    info = app.get_group("obs-event:9")
    assert info is not None and (info.id, info.total, info.key) == ("obs-event:9", 2, "obs-event:9")
    # The members and the callback, once: nothing of the second call was stored.
    stored = app.jobs(key="obs-event:9")
    assert len(stored) == 3 and {j.task for j in stored} == {"t.mail", "t.done"}


def test_concurrent_groups_with_one_id_store_one(app: duly.App) -> None:
    @app.task(name="t.mail")
    def mail(n: int) -> int:
        return n

    async def create_all() -> list[duly.Group]:
        return await asyncio.gather(
            *(app.group_async([mail.s(i), mail.s(i + 1)], id="obs-event:7") for i in range(100))
        )

    groups = app.run_sync(create_all())
    assert len({tuple(j.id for j in g.jobs) for g in groups}) == 1
    assert sum(not g.deduplicated for g in groups) == 1
    assert len(app.jobs(key="obs-event:7")) == 2


@pytest.mark.parametrize(
    ("bad", "error"),
    [
        ("", duly.ConfigurationError),
        ("x" * 201, duly.ConfigurationError),
        ("obs event", duly.ConfigurationError),
        ("obs/event", duly.ConfigurationError),
        ("01ARZ3NDEKTSV4RRFFQ69G5FAVg", duly.ConfigurationError),  # a generated id's form
        (9, TypeError),
    ],
)
def test_a_bad_group_id_is_refused_and_nothing_stored(
    app: duly.App, bad: Any, error: type[Exception]
) -> None:
    @app.task(name="t.mail")
    def mail(n: int) -> int:
        return n

    with pytest.raises(error, match="id="):
        app.group([mail.s(1)], id=bad)
    assert app.jobs(task="t.mail") == []


def test_a_member_retried_to_success_counts_as_succeeded(app: duly.App, run_burst) -> None:
    calls: list[int] = []
    seen: list[duly.GroupInfo | None] = []

    @app.task(name="t.flaky", retries=0)
    def flaky(n: int) -> int:
        calls.append(n)
        if n == 2 and calls.count(2) == 1:
            raise ValueError("first run fails")
        return n

    @app.task(name="t.done")
    def done() -> None:
        seen.append(duly.current_job().group)

    g = app.group([flaky.s(1), flaky.s(2)], on_complete=done.s(), id="obs-event:11")
    run_burst(app)
    info = app.get_group(g.id)
    assert info is not None and (info.succeeded, info.failed, info.pending) == (1, 1, 0)
    first_done = info.completed_at
    assert first_done is not None and len(seen) == 1
    assert app.retry(g.jobs[1].id)
    rerunning = app.get_group(g.id)
    assert rerunning is not None
    assert (rerunning.succeeded, rerunning.failed, rerunning.pending) == (1, 0, 1)
    assert rerunning.completed_at is None and rerunning.callback_job_id is not None
    run_burst(app)
    info = app.get_group(g.id)
    assert info is not None and (info.succeeded, info.failed, info.pending) == (2, 0, 0)
    assert info.completed_at is not None and info.completed_at >= first_done
    assert len(seen) == 1  # on_complete ran once, when every member first had an outcome
    assert app.get_job(info.callback_job_id or "").status == "succeeded"  # type: ignore[union-attr]
