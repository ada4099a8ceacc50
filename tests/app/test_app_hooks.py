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


def test_an_enqueuing_hook_may_change_a_job_in_the_caller_s_context(app: duly.App) -> None:
    """What ``OtelHook`` does: read the caller's context (a ContextVar) and write it into the
    payload before the job is stored; the task still gets its arguments."""

    class Stamp(duly.Hook):
        def enqueuing(self, jobs: Any) -> None:
            for job in jobs:
                job.payload = job.payload[:-1] + b',"request":"%s"}' % REQUEST.get().encode()

    app.add_hook(Stamp())

    @app.task(name="t.add")
    def add(a: int, b: int) -> int:
        return a + b

    REQUEST.set("sync-7")
    job = add.enqueue(1, 2)
    [async_job] = asyncio.run(_in_request("async-8", app, add.s(3, 4)))
    run_jobs(app, [job, async_job])
    for each, request, result in ((job, b"sync-7", 3), (async_job, b"async-8", 7)):
        info = app.get_job(each.id)
        assert info is not None and info.result == result
        assert asyncio.run(_payload(app, each.id)).endswith(b',"request":"%s"}' % request)


REQUEST: contextvars.ContextVar[str] = contextvars.ContextVar("request")


async def _in_request(request: str, app: duly.App, *signatures: duly.Signature) -> list[duly.Job]:
    REQUEST.set(request)  # in this asyncio.run's own copy of the context
    return await _enqueue_async(app, *signatures)


async def _payload(app: duly.App, job_id: str) -> bytes:
    try:
        record = await (await app.backend()).get_job(job_id)
        assert record is not None
        return record.payload
    finally:
        await app.aclose()


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
    """A hook with ``_finished_batch`` (PrometheusHook) gets each report's applied runs in one
    call instead of ``finished`` per run; the other hooks still get ``finished`` per run."""
    batches: list[list[tuple[str, str]]] = []
    each = app.add_hook(Recorder())

    class Batched(duly.Hook):
        def finished(self, record: JobRecord, outcome: Outcome, error: Any) -> None:
            raise AssertionError("finished is not called on a hook that takes batches")

        def _finished_batch(self, items: Any) -> None:
            batches.append([(record.id, outcome.kind) for record, outcome, _ in items])

    batched = app.add_hook(Batched())
    assert app.hooks.batching_finished and app.hooks.watching("finished")

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
    assert not app.hooks.batching_finished


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
    assert overridden == set(duly._hooks.HOOK_EVENTS)
    assert {NewJob, EnqueueResult}  # the types the enqueued hook receives


def test_groups_and_periodic_ticks_pass_through_the_enqueue_hooks(make_app: Any) -> None:
    """Every way a job is stored shows it to ``enqueuing`` (in the caller's context: the group
    is built before the portal runs it) and to ``enqueued``."""
    clock = duly.ManualClock(start=1_800_000_000.5)  # just past a tick: one is due
    app = make_app(clock=clock)
    recorder = app.add_hook(Recorder())
    seen: list[str] = []

    class Context(duly.Hook):
        def enqueuing(self, jobs: Any) -> None:
            seen.extend(f"{job.task}@{REQUEST.get('none')}" for job in jobs)

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
    stored = [(event, detail) for event, _, detail in recorder.events]
    assert stored == [
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


async def _run_scheduler_once(app: duly.App) -> int:
    from duly._scheduler import Scheduler

    try:
        return await Scheduler(app).run_once(await app.backend())
    finally:
        await app.aclose()
