"""list_jobs pages: ``JobFilter(before=...)`` continues a newest-first listing (every index)."""

from __future__ import annotations

import pytest
from contract import DEFAULT_QUEUE, T0, W1, claim_ids, enqueue, finish_one, new_job

from duly._records import JobFilter, Outcome
from duly.backends.base import Backend

pytestmark = pytest.mark.timeout(30)


async def _pages(backend: Backend, size: int, **where: str) -> list[list[str]]:
    """Every page of ``size`` jobs, each one asked with the last id of the page before."""
    pages: list[list[str]] = []
    before: str | None = None
    while True:
        page = [r.id for r in await backend.list_jobs(JobFilter(before=before, **where), size)]
        if not page:
            return pages
        pages.append(page)
        before = page[-1]


async def test_pages_walk_every_job_once_newest_first(backend: Backend) -> None:
    ids = await enqueue(backend, *[new_job(key="k") for _ in range(7)])
    newest_first = ids[::-1]
    expected = [newest_first[0:3], newest_first[3:6], newest_first[6:]]
    assert await _pages(backend, 3) == expected
    assert await _pages(backend, 3, key="k") == expected
    assert await _pages(backend, 3, status="queued") == expected
    assert await _pages(backend, 3, queue=DEFAULT_QUEUE) == expected


async def test_before_an_unknown_id_still_bounds_the_listing(backend: Backend) -> None:
    ids = await enqueue(backend, *[new_job(key="k") for _ in range(4)])
    middle = sorted(ids)[2]
    smaller = [i for i in sorted(ids, reverse=True) if i < middle]
    # An id that is not stored (the job was deleted since) is a bound all the same.
    gone = middle[:-1] + ("0" if middle[-1] != "0" else "1")
    assert [r.id for r in await backend.list_jobs(JobFilter(before=middle), 10)] == smaller
    bound = [i for i in sorted(ids, reverse=True) if i < gone]
    assert [r.id for r in await backend.list_jobs(JobFilter(before=gone, key="k"), 10)] == bound


async def test_pages_of_running_and_finished_jobs(backend: Backend) -> None:
    ids = await enqueue(backend, *[new_job() for _ in range(5)])
    assert await claim_ids(backend, W1, limit=5) == ids
    await finish_one(backend, W1, Outcome(ids[0], "succeeded", expire_at=T0 + 3600), T0)
    await finish_one(backend, W1, Outcome(ids[1], "succeeded", expire_at=T0 + 3600), T0)
    assert await _pages(backend, 2, status="running") == [[ids[4], ids[3]], [ids[2]]]
    assert await _pages(backend, 1, status="succeeded") == [[ids[1]], [ids[0]]]
