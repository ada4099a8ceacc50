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

duly's own ``PrometheusHook`` also defines ``_finished_batch(items)``, which the worker calls
once per reported batch, with every applied ``(record, outcome, error)`` of it, instead of its
``finished`` once per job (a synchronous method: what it returns is ignored).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from duly._job import JobInfo
    from duly._records import EnqueueResult, JobRecord, NewJob, Outcome

__all__ = ["HOOK_EVENTS", "Finished", "Hook", "HookCallResult", "Hooks", "settle"]

log = logging.getLogger("duly.hooks")

#: What a hook method returns: nothing, or an awaitable the caller awaits.
HookCallResult = Awaitable[None] | None

#: What ``finished`` is told of one run: the record, the applied outcome, the run's error.
Finished = tuple["JobRecord", "Outcome", BaseException | None]


class Hook:
    """Base class of hooks: every method is a no-op until overridden."""

    def enqueuing(self, jobs: Sequence[NewJob]) -> None:
        """Jobs are about to be stored: a hook may still change them (``OtelHook`` adds its
        trace context to each payload). Called in the enqueuing call's own thread and context,
        synchronously (what it returns is ignored), before the backend is asked."""

    def enqueued(self, jobs: Sequence[NewJob], results: Sequence[EnqueueResult]) -> HookCallResult:
        """Jobs were stored (``results[i].deduplicated``: ``jobs[i]`` found a holder instead)."""

    def started(self, record: JobRecord) -> HookCallResult:
        """A worker claimed ``record`` and is about to run it (``record`` shows the new run)."""

    def finished(
        self, record: JobRecord, outcome: Outcome, error: BaseException | None
    ) -> HookCallResult:
        """The backend applied a run's outcome: ``outcome.kind`` is succeeded, again (a watch
        checks again), retry, failed or release (handed back without an attempt charged)."""

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


#: The events a hook may watch: the methods of ``Hook``.
HOOK_EVENTS = (
    "enqueuing",
    "enqueued",
    "started",
    "finished",
    "abandoned",
    "retried",
    "failed",
    "recovered",
    "quarantined",
)


class Hooks:
    """The hooks of one App, with the overriding methods listed per event."""

    def __init__(self) -> None:
        self._calls: dict[str, list[tuple[Hook, Callable[..., HookCallResult]]]] = {
            event: [] for event in HOOK_EVENTS
        }
        #: Hooks told of finished runs a batch at a time (``_finished_batch``, see above).
        self._finished_batch: list[tuple[Hook, Callable[[Sequence[Finished]], object]]] = []

    def add(self, hook: Hook) -> None:
        """Call ``hook`` from now on (each overridden method, in the order hooks were added)."""
        if not isinstance(hook, Hook):
            raise TypeError(f"a hook subclasses duly.Hook, got {hook!r}")
        batch = getattr(hook, "_finished_batch", None)
        for event in HOOK_EVENTS:
            if getattr(type(hook), event) is not getattr(Hook, event):
                if event == "finished" and batch is not None:
                    self._finished_batch.append((hook, batch))
                else:
                    self._calls[event].append((hook, getattr(hook, event)))

    def remove(self, hook: Hook) -> None:
        """Stop calling ``hook`` (a hook that was not added is ignored)."""
        for event, calls in self._calls.items():
            self._calls[event] = [(h, method) for h, method in calls if h is not hook]
        self._finished_batch = [(h, m) for h, m in self._finished_batch if h is not hook]

    def watching(self, event: str) -> bool:
        """Whether any hook overrides ``event`` (skip building its arguments otherwise); for
        ``finished``, one called a run at a time (see ``batching_finished``)."""
        return bool(self._calls[event])

    @property
    def batching_finished(self) -> bool:
        """Whether a hook takes finished runs a batch at a time (``tell_finished_batch``)."""
        return bool(self._finished_batch)

    def tell_finished_batch(self, items: Sequence[Finished]) -> None:
        """Tell the hooks that take finished runs a batch at a time of ``items`` (``fire`` of
        ``finished`` calls the others); their errors are logged."""
        for hook, method in self._finished_batch:
            try:
                method(items)
            except Exception:
                log.exception("hook %r raised in finished", hook)

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
