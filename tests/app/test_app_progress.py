"""Progress and checkpoints (PRODUCT §16) on every backend: ``set_progress`` shows as
``JobInfo.progress`` after a heartbeat and at the end, written at most about once a second;
``checkpoint`` / ``cursor`` resume a job after a recovery, a graceful hand-back and a retry
(``retry_from_start=True`` starts over); ``duly.Interrupted`` charges no attempt."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import pytest

import duly
from duly._records import ProgressReport
from duly.backends.events import EVENTS
from duly.backends.progress import PROGRESS, ProgressStore

pytestmark = pytest.mark.timeout(60)

QUICK = duly.Backoff(base=0.01, cap=0.01)


def isolated_pages() -> Any:
    """An isolated run (a child process): resumes from its checkpoint, reports progress."""
    job = duly.current_job()
    if job.attempt == 1:
        for page in range(1, 4):
            job.checkpoint({"page": page})
            job.set_progress(page / 10, f"page {page}")
        raise RuntimeError("the child's upstream went away")
    job.set_progress(1.0, "all pages")
    return job.cursor


def info_of(app: duly.App, job_id: str) -> duly.JobInfo:
    info = app.get_job(job_id)
    assert info is not None, f"job {job_id} vanished"
    return info


def test_progress_shows_after_a_heartbeat_and_its_last_value_at_the_end(
    app: duly.App, worker_thread: Callable[..., Any], wait: Callable[..., Any]
) -> None:
    go_on = threading.Event()

    @app.task(name="progress.pages")
    def pages() -> str:
        job = duly.current_job()
        job.set_progress(0.25, "page 1 of 4")
        go_on.wait(20)
        job.set_progress(1.0, "done")  # the last value, set just before the run ends
        return "ok"

    job = pages.enqueue()
    with worker_thread(app, lease=3.0):
        progress = wait(lambda: info_of(app, job.id).progress)
        assert (progress.fraction, progress.message) == (0.25, "page 1 of 4")
        assert progress.at.tzinfo is not None
        assert info_of(app, job.id).status == "running"
        go_on.set()
        wait(lambda: info_of(app, job.id).finished)
    info = info_of(app, job.id)
    assert info.status == "succeeded"
    assert info.progress is not None
    assert (info.progress.fraction, info.progress.message) == (1.0, "done")
    assert info.to_dict()["progress"]["fraction"] == 1.0


class CountingStore:
    """The backend's own progress store, counting its calls and the reports they carry."""

    def __init__(self, store: ProgressStore) -> None:
        self.store = store
        self.calls: list[list[ProgressReport]] = []

    async def heartbeat(
        self,
        worker: str,
        job_ids: Sequence[str],
        now: float,
        lease_until: float,
        reports: Sequence[ProgressReport],
    ) -> list[str]:
        self.calls.append(list(reports))
        return await self.store.heartbeat(worker, job_ids, now, lease_until, reports)


def test_progress_is_written_about_once_a_second_however_often_it_is_set(
    app: duly.App,
) -> None:
    spent: list[float] = []
    calls = 3000

    @app.task(name="progress.tight_loop")
    def tight_loop() -> None:
        job = duly.current_job()
        began = time.monotonic()
        for i in range(1, calls + 1):
            job.set_progress(i / calls, f"item {i}")
            job.checkpoint(i)
            time.sleep(0.0005)
        spent.append(time.monotonic() - began)

    job = tight_loop.enqueue()

    async def main() -> CountingStore:
        backend = await app.backend()
        counting = CountingStore(PROGRESS.of(backend))
        backend.progress = counting  # type: ignore[attr-defined]
        worker = app.worker(burst=True, install_signal_handlers=False, lease=30.0, poll=0.1)
        try:
            await asyncio.wait_for(worker.run(), 50)
        finally:
            await app.aclose()
        return counting

    counting = asyncio.run(main())
    [seconds] = spent
    writes = len(counting.calls)
    # One write per PROGRESS_INTERVAL (1 s) of the run at most, plus the one before the outcome.
    assert 1 <= writes <= int(seconds) + 2, (writes, seconds)
    assert all(len(reports) == 1 for reports in counting.calls)
    info = info_of(app, job.id)
    assert info.progress is not None
    assert (info.progress.fraction, info.progress.message) == (1.0, f"item {calls}")


def test_a_recovered_job_resumes_from_its_checkpoint(
    app: duly.App, worker_thread: Callable[..., Any], wait: Callable[..., Any]
) -> None:
    resumed_from: list[Any] = []

    @app.task(name="progress.export")
    def export() -> None:
        resumed_from.append(duly.current_job().cursor)

    job = export.enqueue()

    async def crash() -> None:
        """A worker that claims the job, stores a checkpoint with a heartbeat, and dies."""
        try:
            backend = await app.backend()
            now = app.clock.now()
            [claimed] = await backend.claim("doomed", ["default"], 1, now, now + 2.0)
            assert claimed.cursor is None  # a first run has none
            report = ProgressReport(job.id, None, b'{"after": 41}')
            await PROGRESS.of(backend).heartbeat("doomed", [job.id], now, now + 0.5, [report])
        finally:
            await app.aclose()

    asyncio.run(crash())
    with worker_thread(app):  # it recovers the job once its lease lapsed
        wait(lambda: info_of(app, job.id).finished)
    assert resumed_from == [{"after": 41}]
    info = info_of(app, job.id)
    assert (info.status, info.lost) == ("succeeded", 1)


def test_a_drained_job_checkpoints_hands_itself_back_uncharged_and_resumes(
    app: duly.App, worker_thread: Callable[..., Any], wait: Callable[..., Any]
) -> None:
    starts: list[Any] = []
    seen_stopping = threading.Event()

    @app.task(name="progress.long_export", retries=0)
    def long_export() -> int:
        job = duly.current_job()
        start = job.cursor or 0
        starts.append(start)
        for i in range(start, 1_000_000):
            if job.stopping:
                seen_stopping.set()
                raise duly.Interrupted()
            time.sleep(0.001)
            job.checkpoint(i + 1)
            if starts[-1] != 0 and i + 1 >= start + 5:
                return i + 1  # the second run does a few items and ends
        return -1

    job = long_export.enqueue()
    with worker_thread(app, grace=10.0) as worker:
        wait(lambda: info_of(app, job.id).status == "running")
        time.sleep(0.3)
        worker.stop()  # what SIGTERM does: the worker drains
    assert seen_stopping.is_set()
    info = info_of(app, job.id)
    assert (info.status, info.attempts, info.errors) == ("queued", 0, [])
    assert worker.stats.failed == 0
    assert sum(r.failed + r.retried for r in app.stats()) == 0

    with worker_thread(app):
        wait(lambda: info_of(app, job.id).finished)
    first, second = starts
    assert first == 0 and second > 0, starts  # resumed where the first run checkpointed
    final = info_of(app, job.id)
    assert (final.status, final.result, final.attempts) == ("succeeded", second + 5, 1)


@pytest.mark.parametrize("from_start", [False, True])
def test_a_retry_resumes_from_the_checkpoint_unless_retry_from_start(
    app: duly.App, run_burst: Callable[..., Any], from_start: bool
) -> None:
    cursors: list[Any] = []

    @app.task(name="progress.flaky", retries=1, backoff=QUICK, retry_from_start=from_start)
    def flaky() -> str:
        job = duly.current_job()
        cursors.append(job.cursor)
        if job.attempt == 1:
            job.checkpoint({"page": 3})
            raise RuntimeError("upstream went away")
        return "ok"

    job = flaky.enqueue()
    run_burst(app, settle=[job])
    assert info_of(app, job.id).status == "succeeded"
    assert cursors == [None, None if from_start else {"page": 3}]


def test_interrupted_outside_a_drain_hands_the_job_back_uncharged(
    app: duly.App, run_burst: Callable[..., Any]
) -> None:
    runs: list[tuple[int, Any]] = []

    @app.task(name="progress.polite", retries=0)
    def polite() -> str:
        job = duly.current_job()
        runs.append((job.attempt, job.cursor))
        if job.cursor is None:
            job.checkpoint("half")
            raise duly.Interrupted()
        return "done"

    job = polite.enqueue()
    run_burst(app)
    info = info_of(app, job.id)
    # retries=0: had the hand-back been charged or failed, the job would have failed.
    assert (info.status, info.result, info.attempts, info.errors) == ("succeeded", "done", 1, [])
    assert runs == [(1, None), (1, "half")]


def test_bad_progress_and_checkpoints_raise_clear_errors(
    app: duly.App, run_burst: Callable[..., Any]
) -> None:
    raised: list[str] = []

    @app.task(name="progress.bad_input")
    def bad_input() -> None:
        job = duly.current_job()
        for call in (
            lambda: job.set_progress(1.5),
            lambda: job.set_progress(-0.1),
            lambda: job.set_progress(float("nan")),
            lambda: job.set_progress("half"),  # type: ignore[arg-type]
            lambda: job.set_progress(True),
            lambda: job.set_progress(0.5, message=7),  # type: ignore[arg-type]
            lambda: job.checkpoint(object()),
        ):
            try:
                call()
            except (TypeError, ValueError) as exc:
                raised.append(type(exc).__name__)

    job = bad_input.enqueue()
    run_burst(app)
    assert raised == ["ValueError"] * 3 + ["TypeError"] * 4
    info = info_of(app, job.id)
    assert info.status == "succeeded" and info.progress is None


def test_retry_from_start_must_be_a_bool(app: duly.App) -> None:
    with pytest.raises(duly.ConfigurationError, match="retry_from_start"):

        @app.task(name="progress.bad_option", retry_from_start="yes")  # type: ignore[call-overload]
        def bad_option() -> None: ...


async def _events(app: duly.App, since: str, progress: bool, until: str) -> list[duly.Event]:
    """The events after ``since`` up to the ``until`` status of a job."""
    seen: list[duly.Event] = []
    try:
        async for ev in app.events(since=since, key="export:1", progress=progress):
            seen.append(ev)
            if ev.status == until:
                return seen
    finally:
        await app.aclose()
    return seen


def test_progress_is_an_event_only_for_readers_that_ask(
    app: duly.App, run_burst: Callable[..., Any]
) -> None:
    @app.task(name="progress.evented")
    def evented() -> None:
        duly.current_job().set_progress(0.5, "half way")

    async def head() -> str:
        try:
            _, cursor = await EVENTS.of(await app.backend()).read(None, "export:1", 1)
            return cursor
        finally:
            await app.aclose()

    since = asyncio.run(head())
    job = evented.options(key="export:1").enqueue()
    run_burst(app)
    plain = asyncio.run(_events(app, since, False, "succeeded"))
    assert [e.status for e in plain] == ["queued", "running", "succeeded"]
    assert all(e.progress is None for e in plain)
    with_progress = asyncio.run(_events(app, since, True, "succeeded"))
    assert [e.status for e in with_progress] == ["queued", "running", "running", "succeeded"]
    progress = with_progress[2].progress
    assert with_progress[2].job_id == job.id and progress is not None
    assert (progress.fraction, progress.message) == (0.5, "half way")
    with pytest.raises(TypeError, match="progress"):
        app.events(progress="yes")  # type: ignore[arg-type]


def test_an_isolated_run_resumes_from_its_checkpoint_and_reports_progress(
    app: duly.App, run_burst: Callable[..., Any]
) -> None:
    pages = app.task(isolated=True, retries=1, backoff=QUICK, name="progress.iso")(isolated_pages)
    job = pages.enqueue()
    run_burst(app, settle=[job])
    info = info_of(app, job.id)
    assert (info.status, info.result, info.attempts) == ("succeeded", {"page": 3}, 2)
    assert info.progress is not None
    assert (info.progress.fraction, info.progress.message) == (1.0, "all pages")
