"""Hooks: the one seam through which metrics, events, logs and callbacks watch jobs.

Subclass ``Hook``, override the methods you need and ``app.add_hook(MyHook())``. The App calls
``enqueued``; every worker of the App calls the rest, in its own process, after the backend
applied the change (a hook never sees a state that was not stored)::

    class CountFailures(duly.Hook):
        def __init__(self) -> None:
            self.failed = 0

        def failed(self, job, error):          # a job failed for good
            self.failed += 1

Methods run on the worker's event loop: keep them quick, or return an awaitable (an
``async def`` method), which is awaited before the worker reports its next batch. An exception
raised by a hook is logged and never changes a job. Only overridden methods are called, so a
hook costs nothing on events it does not watch.

``Hook``'s docstring says how headers travel from an enqueue to its runs and how a hook takes
finished runs a batch at a time.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any, cast

from duly._errors import ConfigurationTypeError
from duly._payload import with_headers

if TYPE_CHECKING:
    from duly._context import RunContext
    from duly._job import JobInfo
    from duly._records import EnqueueResult, JobRecord, NewJob, Outcome

__all__ = ["HOOK_EVENTS", "Around", "Finished", "Hook", "HookCallResult", "Hooks", "settle"]

log = logging.getLogger("duly.hooks")

#: What a hook method returns: nothing, or an awaitable the caller awaits.
HookCallResult = Awaitable[None] | None

#: What ``around_run`` returns: a context manager (an async one too, for an async task).
Around = AbstractContextManager[Any] | AbstractAsyncContextManager[Any]

#: What ``finished`` is told of one run: the record, the applied outcome, the run's error.
Finished = tuple["JobRecord", "Outcome", BaseException | None]


class Hook:
    """Base class of hooks: every method is a no-op until overridden.

    **Headers** carry text from a job's enqueue to its runs (trace context, a tenant, a request
    id): a hook sets ``job.headers["name"] = "value"`` in ``enqueuing`` (a ``NewJob`` each), duly
    stores them with the job, and every run's ``JobRecord.headers`` gives them back (``started``,
    ``finished``...). They are never arguments: the task, ``JobInfo``, the API and the dashboard
    do not see them. ``OtelHook`` carries its ``traceparent`` this way.

    **Batches of finished runs**: a worker stores the outcomes of several runs in one call; a hook
    that overrides ``finished_batch(items)`` is told of them once per such call, with every applied
    ``(record, outcome, error)`` (one clock reading for them all: ``PrometheusHook`` does this),
    instead of ``finished`` once per run. Its default calls ``finished`` for each run.
    Likewise ``started_batch(records)``: the runs a worker starts together (one claim), told
    once before they run, instead of ``started`` once per run.
    """

    def enqueuing(self, jobs: Sequence[NewJob]) -> None:
        """Jobs are about to be stored: a hook may still change them, and set their
        ``headers`` (``OtelHook`` adds its trace context). Called in the enqueuing call's own
        thread and context, synchronously (what it returns is ignored), before the backend is
        asked."""

    def enqueued(self, jobs: Sequence[NewJob], results: Sequence[EnqueueResult]) -> HookCallResult:
        """Jobs were stored (``results[i].deduplicated``: ``jobs[i]`` found a holder instead)."""

    def started(self, record: JobRecord) -> HookCallResult:
        """A worker claimed ``record`` and is about to run it (``record`` shows the new run)."""

    def started_batch(self, records: Sequence[JobRecord]) -> HookCallResult:
        """A worker claimed ``records`` together and is about to run them. This default calls
        ``started`` for each; a hook that overrides it is told once per batch, before any of
        them runs (and after nothing else: the other hooks' ``started`` come in each run's own
        task), and its ``started`` is not called by the worker."""
        pending = [returned for record in records if (returned := self.started(record)) is not None]
        return settle("started", pending) if pending else None

    def finished(
        self, record: JobRecord, outcome: Outcome, error: BaseException | None
    ) -> HookCallResult:
        """The backend applied a run's outcome: ``outcome.kind`` is succeeded, again (a watch
        checks again), retry, failed or release (handed back without an attempt charged)."""

    def finished_batch(self, items: Sequence[Finished]) -> HookCallResult:
        """The backend applied the outcomes of ``items`` (each ``(record, outcome, error)``)
        in one call. This default calls ``finished`` for each; a hook that overrides it is
        told once per batch, after the other hooks' ``finished``, ``retried`` and ``failed``
        calls for its runs, and its ``finished`` is not called by the worker."""
        pending = [
            returned
            for record, outcome, error in items
            if (returned := self.finished(record, outcome, error)) is not None
        ]
        return settle("finished", pending) if pending else None

    def abandoned(self, record: JobRecord, outcome: Outcome) -> HookCallResult:
        """A run ended but the backend did not keep its outcome: the job's cancel was requested
        while it ran (it ended ``cancelled``), or this worker's lease lapsed and the job was
        recovered (it runs elsewhere)."""

    def retried(
        self, record: JobRecord, error: BaseException | None, run_at: float
    ) -> HookCallResult:
        """A run failed and the job will run again at ``run_at`` (a ``finished`` retry)."""

    def failed(self, job: JobInfo, error: BaseException) -> HookCallResult:
        """A job failed for good: its last attempt failed, or it was quarantined."""

    def recovered(self, job_id: str, requeued: bool) -> HookCallResult:
        """A job's worker died (its lease lapsed): back in its queue, or quarantined."""

    def quarantined(self, job: JobInfo, error: BaseException) -> HookCallResult:
        """A job lost its worker ``max_lost`` times and failed (``failed`` is called too)."""

    def expired(self, record: JobRecord) -> HookCallResult:
        """A claim found the job still waiting past its ``expires`` time: it never ran, and
        ended ``cancelled`` with a ``JobExpired`` error (``record`` shows it so)."""

    def around_run(self, ctx: RunContext) -> Around:
        """A context manager entered around each run (a DB session, a tenant, a log context),
        in the run's own thread (a sync task) or asyncio task (an async task, which may also
        get an async context manager), so what it sets there (a contextvar, a thread-local)
        is visible inside the task. An error it raises, entering or exiting, fails the run as
        the task's own would (retried per the task's policy). The hooks' managers nest in the
        order the hooks were added (the first outermost). For an ``isolated`` task it is
        entered in the worker's process, around the child's run. Not overriding it costs a
        run nothing."""
        return nullcontext()


#: The events a hook may watch: the methods of ``Hook``.
HOOK_EVENTS = (
    "enqueuing",
    "enqueued",
    "started",
    "started_batch",
    "finished",
    "finished_batch",
    "abandoned",
    "retried",
    "failed",
    "recovered",
    "quarantined",
    "expired",
    "around_run",
)


class Hooks:
    """The hooks of one App, with the overriding methods listed per event."""

    def __init__(self) -> None:
        self._calls: dict[str, list[tuple[Hook, Callable[..., HookCallResult]]]] = {
            event: [] for event in HOOK_EVENTS
        }

    def add(self, hook: Hook) -> None:
        """Call ``hook`` from now on (each overridden method, in the order hooks were added)."""
        if not isinstance(hook, Hook):
            raise ConfigurationTypeError(f"a hook subclasses duly.Hook, got {hook!r}")
        kind = type(hook)
        # A hook told of runs a batch at a time is not told of them one by one too.
        batched = {
            single
            for single, batch in (("started", "started_batch"), ("finished", "finished_batch"))
            if getattr(kind, batch) is not getattr(Hook, batch)
        }
        for event in HOOK_EVENTS:
            overridden = getattr(kind, event) is not getattr(Hook, event)
            if overridden and event not in batched:
                self._calls[event].append((hook, getattr(hook, event)))

    def remove(self, hook: Hook) -> None:
        """Stop calling ``hook`` (a hook that was not added is ignored)."""
        for event, calls in self._calls.items():
            self._calls[event] = [(h, method) for h, method in calls if h is not hook]

    def watching(self, event: str) -> bool:
        """Whether any hook overrides ``event`` (skip building its arguments otherwise); for
        ``started`` and ``finished``, one called a run at a time (``started_batch`` and
        ``finished_batch``: the others)."""
        return bool(self._calls[event])

    @property
    def arounds(self) -> list[Callable[[RunContext], Around]]:
        """The overriding ``around_run`` methods, in the order their hooks were added."""
        return [cast("Callable[[RunContext], Around]", m) for _, m in self._calls["around_run"]]

    def enqueuing(self, jobs: Sequence[NewJob]) -> None:
        """Call the ``enqueuing`` hooks, then store the headers they set in each job's payload
        (a hook's bad header is logged and left out, the job is still stored)."""
        self.call("enqueuing", jobs)
        for job in jobs:
            if job.headers:
                try:
                    job.payload = with_headers(job.payload, job.headers)
                except TypeError:
                    log.exception("a hook set a header that is not str: str on job %s", job.id)
                    job.headers = {}

    def call(self, event: str, *args: Any) -> list[Awaitable[None]]:
        """Call every hook watching ``event``; returns the awaitables some returned."""
        pending: list[Awaitable[None]] = []
        for hook, method in self._calls[event]:
            try:
                returned = method(*args)
            except Exception:
                log.exception("hook %r raised in %s", hook, event)
                continue
            if returned is not None and inspect.isawaitable(returned):
                pending.append(returned)
        return pending

    def fire(self, event: str, *args: Any) -> Awaitable[None] | None:
        """Call every hook watching ``event``; an awaitable settling what they returned, or
        None if none returned one. Cheaper than ``emit`` on a hot path: no coroutine is made
        when there is nothing to await."""
        pending = self.call(event, *args)
        return settle(event, pending) if pending else None

    async def emit(self, event: str, *args: Any) -> None:
        """Call every hook watching ``event`` and await what they returned; errors are logged."""
        pending = self.call(event, *args)
        if pending:
            await settle(event, pending)


async def settle(event: str, pending: Sequence[Awaitable[None]]) -> None:
    """Await what hooks returned for ``event``, logging (never raising) their errors."""
    for awaitable in pending:
        try:
            await awaitable
        except Exception:
            log.exception("a hook raised in %s", event)
