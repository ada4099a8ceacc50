"""Hooks (``duly.Hook``): the one seam for metrics, events and callbacks, on every backend.

The App calls ``enqueued``; the worker calls ``started``, ``finished``, ``retried``,
``failed``, ``recovered`` and ``quarantined`` only after the backend applied the change.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from typing import Any

import pytest
from services import claim_as

import duly
import duly._hooks
from duly._records import EnqueueResult, JobRecord, NewJob, Outcome
from duly.testing import run_jobs


class Recorder(duly.Hook):
    """Every event, as ``(event, job id, detail)``, in the order the hooks were called."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, Any]] = []
        self.lock = threading.Lock()

    def _add(self, *event: Any) -> None:
        with self.lock:
            self.events.append(event)

    def enqueuing(self, jobs: Any) -> None:
        for job in jobs:
            self._add("enqueuing", job.id, job.task)

    def enqueued(self, jobs: Any, results: Any) -> None:
        for job, result in zip(jobs, results, strict=True):
            self._add("enqueued", result.id, (job.task, result.deduplicated))

    def started(self, record: JobRecord) -> None:
        self._add("started", record.id, record.attempts)

    def finished(self, record: JobRecord, outcome: Outcome, error: BaseException | None) -> None:
        self._add("finished", record.id, (outcome.kind, type(error).__name__ if error else None))

    def expired(self, record: JobRecord) -> None:
        self._add("expired", record.id, record.status)

    def abandoned(self, record: JobRecord, outcome: Outcome) -> None:
        self._add("abandoned", record.id, outcome.kind)

    def retried(self, record: JobRecord, error: BaseException | None, run_at: float) -> None:
        self._add("retried", record.id, type(error).__name__)

    def failed(self, job: duly.JobInfo, error: BaseException) -> None:
        self._add("failed", job.id, (job.status, str(error)))

    def recovered(self, job_id: str, requeued: bool) -> None:
        self._add("recovered", job_id, requeued)

    def quarantined(self, job: duly.JobInfo, error: BaseException) -> None:
        self._add("quarantined", job.id, str(error))

    def of(self, job_id: str) -> list[tuple[str, Any]]:
        return [(event, detail) for event, jid, detail in self.events if jid == job_id]


def test_enqueue_hooks_see_every_stored_job_and_deduplication(app: duly.App) -> None:
    recorder = app.add_hook(Recorder())  # typed: add_hook returns the hook it was given

    @app.task(name="t.sync", unique="{n}")
    def sync(n: int) -> None: ...

    first = sync.enqueue(1)
    again = sync.enqueue(1)
    [second] = asyncio.run(_enqueue_async(app, sync.s(2)))
    assert again.deduplicated and again.id == first.id
    [(_, duplicate, _)] = recorder.events[2:3]  # the duplicate's own id, never stored
    assert recorder.events == [
        ("enqueuing", first.id, "t.sync"),
        ("enqueued", first.id, ("t.sync", False)),
        ("enqueuing", duplicate, "t.sync"),
        ("enqueued", first.id, ("t.sync", True)),
        ("enqueuing", second.id, "t.sync"),
        ("enqueued", second.id, ("t.sync", False)),
    ]


def test_an_enqueuing_hook_sets_headers_its_runs_read_back(app: duly.App) -> None:
    """What ``OtelHook`` does: read the caller's context (a ContextVar) into the job's headers
    before it is stored; every run's record gives them back (a retry's too), and they never
    become arguments: the task, ``JobInfo`` (the API, the dashboard) see only its own."""
    seen: dict[str, list[dict[str, str]]] = {}
    ran: list[tuple[int, int]] = []

    class Stamp(duly.Hook):
        def enqueuing(self, jobs: Any) -> None:
            for job in jobs:
                job.headers["request"] = REQUEST.get()
                job.headers["tenant"] = "acme-tenant"

        def started(self, record: JobRecord) -> None:
            seen.setdefault(record.id, []).append(record.headers)

    app.add_hook(Stamp())
    fast = duly.Backoff(base=0.01, cap=0.02)

    @app.task(name="t.add", retries=1, backoff=fast)
    def add(a: int, b: int) -> int:
        ran.append((a, b))
        if duly.current_job().attempt == 1 and a == 1:
            raise ConnectionError("first attempt fails")
        return a + b

    REQUEST.set("sync-7")
    job = add.enqueue(1, b=2)
    [async_job] = asyncio.run(_in_request("async-8", app, add.s(3, 4)))
    run_jobs(app, [job, async_job])
    assert sorted(ran) == [(1, 2), (1, 2), (3, 4)]
    for each, request, runs, result in ((job, "sync-7", 2, 3), (async_job, "async-8", 1, 7)):
        assert seen[each.id] == [{"request": request, "tenant": "acme-tenant"}] * runs
        info = app.get_job(each.id)
        assert info is not None and info.result == result
        assert "acme-tenant" not in repr(info)
    info = app.get_job(job.id)
    assert info is not None and (info.args, info.kwargs) == ([1], {"b": 2})


def test_a_header_that_is_not_text_is_left_out_and_logged(
    app: duly.App, stored: Any, caplog: pytest.LogCaptureFixture
) -> None:
    class Bad(duly.Hook):
        def enqueuing(self, jobs: Any) -> None:
            for job in jobs:
                job.headers["attempts"] = 3

    app.add_hook(Bad())

    @app.task(name="t.add")
    def add(a: int, b: int) -> int:
        return a + b

    job = add.enqueue(1, 2)
    run_jobs(app, [job])
    info = app.get_job(job.id)
    assert info is not None and info.result == 3
    assert "not str: str" in caplog.text
    assert stored(app, job.id)[0].payload == b'{"args":[1,2],"kwargs":{}}'


REQUEST: contextvars.ContextVar[str] = contextvars.ContextVar("request")


async def _in_request(request: str, app: duly.App, *signatures: duly.Signature) -> list[duly.Job]:
    REQUEST.set(request)  # in this asyncio.run's own copy of the context
    return await _enqueue_async(app, *signatures)


async def _enqueue_async(app: duly.App, *signatures: duly.Signature) -> list[duly.Job]:
    try:
        return await app.enqueue_many_async(signatures)
    finally:
        await app.aclose()


def test_worker_hooks_follow_each_run_after_it_is_stored(app: duly.App) -> None:
    recorder = app.add_hook(Recorder())  # typed: add_hook returns the hook it was given

    @app.task(name="t.fine")
    async def fine() -> int:
        return 1

    @app.task(name="t.flaky", retries=1, backoff=duly.Backoff(0.01, 0.02))
    def flaky() -> str:
        if duly.current_job().attempt == 1:
            raise ConnectionError("once")
        return "ok"

    @app.task(name="t.doomed", retries=0)
    def doomed() -> None:
        raise ValueError("declined")

    jobs = [fine.enqueue(), flaky.enqueue(), doomed.enqueue()]
    run_jobs(app, jobs)
    ok, flaky_job, doomed_job = (j.id for j in jobs)
    assert recorder.of(ok) == [
        ("enqueuing", "t.fine"),
        ("enqueued", ("t.fine", False)),
        ("started", 1),
        ("finished", ("succeeded", None)),
    ]
    assert recorder.of(flaky_job) == [
        ("enqueuing", "t.flaky"),
        ("enqueued", ("t.flaky", False)),
        ("started", 1),
        ("finished", ("retry", "ConnectionError")),
        ("retried", "ConnectionError"),
        ("started", 2),
        ("finished", ("succeeded", None)),
    ]
    assert recorder.of(doomed_job) == [
        ("enqueuing", "t.doomed"),
        ("enqueued", ("t.doomed", False)),
        ("started", 1),
        ("finished", ("failed", "ValueError")),
        ("failed", ("failed", "declined")),
    ]


def test_a_hook_may_take_finished_runs_a_batch_at_a_time(app: duly.App) -> None:
    """A hook overriding ``finished_batch`` (PrometheusHook) gets each report's applied runs in
    one call instead of ``finished`` per run (an async one is awaited); the other hooks still
    get ``finished`` per run."""
    batches: list[list[tuple[str, str]]] = []
    each = app.add_hook(Recorder())

    class Batched(duly.Hook):
        def finished(self, record: JobRecord, outcome: Outcome, error: Any) -> None:
            raise AssertionError("finished is not called on a hook that takes batches")

        async def finished_batch(self, items: Any) -> None:
            await asyncio.sleep(0)
            batches.append([(record.id, outcome.kind) for record, outcome, _ in items])

    batched = app.add_hook(Batched())
    assert app.hooks.watching("finished_batch") and app.hooks.watching("finished")

    @app.task(name="t.fine")
    async def fine() -> int:
        return 1

    jobs = app.enqueue_many([fine.s() for _ in range(20)])
    run_jobs(app, jobs)
    told = [item for batch in batches for item in batch]
    assert sorted(told) == sorted((job.id, "succeeded") for job in jobs)
    assert len(batches) < len(jobs)  # runs ending together are told together
    assert sum(e[0] == "finished" for e in each.events) == len(jobs)
    app.hooks.remove(batched)
    assert not app.hooks.watching("finished_batch")


def test_a_hook_may_take_started_runs_a_batch_at_a_time(app: duly.App) -> None:
    """A hook overriding ``started_batch`` (PrometheusHook) is told of a claim's runs in one
    call, before any of them runs (an async one is awaited first), instead of ``started`` per
    run; the other hooks still get ``started`` per run, in the run's own task."""
    batches: list[list[str]] = []
    ran: list[str] = []
    each = app.add_hook(Recorder())

    class Batched(duly.Hook):
        def started(self, record: JobRecord) -> None:
            raise AssertionError("started is not called on a hook that takes batches")

        async def started_batch(self, records: Any) -> None:
            await asyncio.sleep(0)
            assert not set(ran) & {record.id for record in records}
            batches.append([record.id for record in records])

    batched = app.add_hook(Batched())
    assert app.hooks.watching("started_batch") and app.hooks.watching("started")

    @app.task(name="t.noted")
    async def noted() -> None:
        ran.append(duly.current_job().id)

    jobs = app.enqueue_many([noted.s() for _ in range(20)])
    run_jobs(app, jobs)
    told = [job_id for batch in batches for job_id in batch]
    assert sorted(told) == sorted(job.id for job in jobs) == sorted(ran)
    assert len(batches) < len(jobs)  # runs claimed together are told together
    assert sum(e[0] == "started" for e in each.events) == len(jobs)
    app.hooks.remove(batched)
    assert not app.hooks.watching("started_batch")


def test_started_batch_calls_started_per_run_by_default() -> None:
    """``Hook.started_batch``'s default is ``started`` once per run, in order; what async
    ``started`` return is settled in one awaitable."""
    records = [
        JobRecord(str(n), "t", "default", b"{}", "running", 1, 1, None, 0, 0.0) for n in range(3)
    ]
    seen: list[str] = []

    class Each(duly.Hook):
        def started(self, record: JobRecord) -> None:
            seen.append(record.id)

    class AsyncEach(duly.Hook):
        async def started(self, record: JobRecord) -> None:
            seen.append(record.id)

    assert Each().started_batch(records) is None
    assert seen == ["0", "1", "2"]
    waiting = AsyncEach().started_batch(records)
    assert waiting is not None
    asyncio.run(waiting)  # type: ignore[arg-type]
    assert seen == ["0", "1", "2"] * 2


def test_finished_batch_calls_finished_per_run_by_default() -> None:
    """``Hook.finished_batch``'s default is ``finished`` once per run, in order; what async
    ``finished`` calls return is one awaitable (their errors logged, never raised)."""
    told: list[str] = []

    class Each(duly.Hook):
        def finished(self, record: JobRecord, outcome: Outcome, error: Any) -> None:
            told.append(record.id)

    class AsyncEach(duly.Hook):
        async def finished(self, record: JobRecord, outcome: Outcome, error: Any) -> None:
            if record.id == "b":
                raise RuntimeError("bug in a hook")
            told.append(record.id.upper())

    def item(job_id: str) -> duly._hooks.Finished:
        record = JobRecord(job_id, "t", "default", b"{}", "succeeded", 1, 1, None, 0, 0.0)
        return (record, Outcome(job_id, "succeeded"), None)

    items = [item("a"), item("b"), item("c")]
    assert Each().finished_batch(items) is None
    assert told == ["a", "b", "c"]
    waiting = AsyncEach().finished_batch(items)
    assert waiting is not None
    asyncio.run(waiting)  # type: ignore[arg-type]
    assert told == ["a", "b", "c", "A", "C"]


def test_a_broken_hook_is_logged_and_harms_nothing(
    app: duly.App, caplog: pytest.LogCaptureFixture
) -> None:
    calls: list[str] = []

    class Broken(duly.Hook):
        def enqueuing(self, jobs: Any) -> None:
            raise RuntimeError("bug in a hook")

        def enqueued(self, jobs: Any, results: Any) -> None:
            raise RuntimeError("bug in a hook")

        def finished(self, record: JobRecord, outcome: Outcome, error: Any) -> None:
            raise RuntimeError("bug in a hook")

    class Async(duly.Hook):
        async def finished(self, record: JobRecord, outcome: Outcome, error: Any) -> None:
            await asyncio.sleep(0)
            calls.append(outcome.kind)

    app.add_hook(Broken())
    app.add_hook(Async())

    @app.task(name="t.fine")
    def fine() -> int:
        return 1

    job = fine.enqueue()
    run_jobs(app, [job])
    info = app.get_job(job.id)
    assert info is not None and (info.status, info.result) == ("succeeded", 1)
    assert calls == ["succeeded"]  # an async hook is awaited; the broken one before it logged
    assert sum("bug in a hook" in r.getMessage() or r.exc_info is not None for r in caplog.records)


def test_removed_hooks_are_not_called_and_only_hooks_are_accepted(app: duly.App) -> None:
    recorder = Recorder()
    app.add_hook(recorder)
    app.hooks.remove(recorder)

    @app.task(name="t.fine")
    def fine() -> None: ...

    fine.enqueue()
    assert recorder.events == []
    assert not app.hooks.watching("enqueued")
    with pytest.raises(TypeError, match=r"subclasses duly\.Hook"):
        app.add_hook(object())  # type: ignore[arg-type]


def test_a_run_whose_outcome_is_not_kept_is_abandoned(app: duly.App, worker_thread, wait) -> None:
    """A job cancelled while it runs: its run ends (``abandoned``), its outcome is not stored
    (no ``finished``), so a gauge of runs in flight comes back down."""
    recorder = app.add_hook(Recorder())
    running, release = threading.Event(), threading.Event()

    @app.task(name="t.long")
    def long() -> str:
        running.set()
        release.wait(20)
        return "done anyway"

    job = long.enqueue()
    with worker_thread(app):
        assert running.wait(20)
        assert app.cancel(job.id)
        release.set()
        wait(lambda: any(e == "abandoned" for e, _ in recorder.of(job.id)))
    assert [e for e in recorder.of(job.id) if not e[0].startswith("enqueu")] == [
        ("started", 1),
        ("abandoned", "succeeded"),
    ]
    info = app.get_job(job.id)
    assert info is not None and (info.status, info.result) == ("cancelled", None)


@pytest.mark.parametrize("max_lost", [3, 1], ids=["recovered", "quarantined"])
def test_recovery_hooks(make_app, worker_thread, wait, max_lost: int) -> None:
    app = make_app(max_lost=max_lost)
    recorder = app.add_hook(Recorder())

    @app.task(name="t.orphan", retries=0)
    def orphan() -> str:
        return "ok"

    job = orphan.enqueue()

    claim_as(app, job.id, "dead-worker", lease=-1)
    ends = "succeeded" if max_lost > 1 else "failed"
    with worker_thread(app):
        wait(lambda: app.get_job(job.id).status == ends)
        wait(lambda: any(e == "recovered" for e, _ in recorder.of(job.id)))
        if ends == "failed":
            wait(lambda: any(e == "failed" for e, _ in recorder.of(job.id)))
    events = [e for e in recorder.of(job.id) if not e[0].startswith("enqueu")]
    if max_lost > 1:
        assert events[0] == ("recovered", True)
        assert [e for e, _ in events[1:]] == ["started", "finished"]
    else:
        assert events == [
            ("recovered", False),
            ("quarantined", "lost its worker 1 times"),
            ("failed", ("failed", "lost its worker 1 times")),
        ]


def test_hook_signatures_match_the_base_class() -> None:
    """The recorder above overrides every event: a renamed event would be caught here."""
    overridden = {name for name in duly._hooks.HOOK_EVENTS if name in Recorder.__dict__}
    # ... but started_batch and finished_batch, which would take ``started`` and ``finished``
    # from it (tested on their own above), and around_run, which wraps runs rather than tells
    # of them (test_app_around_run.py)
    batches = {"started_batch", "finished_batch", "around_run"}
    assert overridden == set(duly._hooks.HOOK_EVENTS) - batches
    assert {NewJob, EnqueueResult}  # the types the enqueued hook receives


def test_groups_and_periodic_ticks_pass_through_the_enqueue_hooks(
    make_app: Any, stored: Any
) -> None:
    """Every way a job is stored shows it to ``enqueuing`` (in the caller's context: the group
    is built before the portal runs it) and to ``enqueued``."""
    clock = duly.ManualClock(start=1_800_000_000.5)  # just past a tick: one is due
    app = make_app(clock=clock)
    recorder = app.add_hook(Recorder())
    seen: list[str] = []

    class Context(duly.Hook):
        def enqueuing(self, jobs: Any) -> None:
            seen.extend(f"{job.task}@{REQUEST.get('none')}" for job in jobs)
            for job in jobs:
                job.headers["via"] = job.task

    app.add_hook(Context())

    @app.task(name="t.member")
    def member(n: int) -> None: ...

    @app.task(name="t.done")
    def done() -> None: ...

    @app.periodic(every=3600, name="t.tick")
    def tick() -> None: ...

    REQUEST.set("group-9")
    group = app.group([member.s(1), member.s(2)], on_complete=done.s())
    # A worker's scheduler runs in a context of its own, not the one of any request.
    ticks = contextvars.Context().run(asyncio.run, _run_scheduler_once(app))
    assert ticks == 1
    assert seen == ["t.member@group-9", "t.member@group-9", "t.done@group-9", "t.tick@none"]
    told = [(event, detail) for event, _, detail in recorder.events]
    assert told == [
        ("enqueuing", "t.member"),
        ("enqueuing", "t.member"),
        ("enqueuing", "t.done"),
        ("enqueued", ("t.member", False)),
        ("enqueued", ("t.member", False)),
        ("enqueued", ("t.done", False)),
        ("enqueuing", "t.tick"),
        ("enqueued", ("t.tick", False)),
    ]
    assert [jid for event, jid, _ in recorder.events[:2]] == [job.id for job in group.jobs]
    # and each is stored with the headers its enqueuing hooks set
    tasks = {jid: detail[0] for event, jid, detail in recorder.events if event == "enqueued"}
    records = stored(app, *tasks)
    assert [record.headers for record in records] == [{"via": t} for t in tasks.values()]


async def _run_scheduler_once(app: duly.App) -> int:
    from duly._scheduler import Scheduler

    try:
        return await Scheduler(app).run_once(await app.backend())
    finally:
        await app.aclose()
