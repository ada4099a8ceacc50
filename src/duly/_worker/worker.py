"""The worker: claims jobs in batches, runs them, keeps their leases, recovers orphans.

One asyncio loop per process runs five cooperating loops:

- **fetch**: claim up to the free capacity in one round trip; jobs of rate-limited tasks then
  reserve their slots in one more round trip, and those whose slot starts later are handed
  back to start then; when nothing is claimable, wait for the backend's wake-up (or a short
  poll); on a backend that hands jobs to idle workers (``duly.backends.handoff``: Redis), the claim
  that found nothing registers this process as idle and the wait returns the job an enqueue
  claimed for it (no wake-up hop, no claim round trip, no herd of processes);
- **run**: each claimed job runs as an asyncio task (``async def``) or on the bounded
  ``ThreadRunner`` (``def``), with its timeout;
- **ack**: finished runs' outcomes are reported in batches, one round trip per batch;
- **heartbeat** and **maintenance** (``duly._worker.maintenance``): leases renewed every
  ``lease / 3``; due delayed/retrying jobs promoted, the jobs of dead workers recovered, expired
  finished jobs purged.

Rate-limit admission lives in ``duly._worker.admission``, the batched report of outcomes (and
the hooks it calls) in ``duly._worker.outcomes``.

Graceful stop (SIGTERM/SIGINT): stop fetching, let running jobs finish within ``grace``
seconds, then hand the rest back to their queue without charging an attempt.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import signal
import socket
import threading
import time
from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from duly._context import StopFlag
from duly._errors import BackendUnavailable, ConfigurationError, DulyError
from duly._freshness import sweep
from duly._ids import new_id
from duly._records import JobRecord, Outcome
from duly._scheduler import Scheduler
from duly._worker.admission import Admission
from duly._worker.execute import Execution, failure_outcome
from duly._worker.expiry import runnable
from duly._worker.isolation import IsolatedPool
from duly._worker.leases import LeaseShare
from duly._worker.maintenance import PROMOTE_INTERVAL, Maintenance, Retention, logged
from duly._worker.outcomes import BATCH_LIMIT, Outcomes
from duly._worker.progress import ProgressWriter
from duly._worker.recycling import Recycling
from duly._worker.reporting import Reporter, WorkerStats
from duly._worker.settings import default_concurrency, parse_queues
from duly._worker.stopping import StopRequests
from duly._worker.threads import ThreadRunner
from duly.backends.handoff import HANDOFF, Handoff

if TYPE_CHECKING:
    from duly._app import App
    from duly.backends.base import Backend

__all__ = ["Worker", "WorkerStats"]

log = logging.getLogger("duly.worker")

MIN_LEASE = 2.0
#: Seconds an idle registration outlives the wait it is made for (the worker renews it with its
#: next claim, at the latest when that wait times out).
IDLE_SLACK = 0.5


class Worker:
    """Runs an App's jobs. ``await Worker(app).run()``; ``stop()`` from anywhere to end it.

    ``queues`` (default: every queue the app's tasks declare, ``default`` first: see
    ``Registry.queues``) are tried in order (earlier first), or, written ``"name:weight"``, in
    a weighted random order drawn for each claim, so every queue gets its share and none
    starves (see ``docs/guide.md``, "Priorities and queues"); ``concurrency`` jobs run at
    once (default: ``duly._worker.settings.default_concurrency``: 128 when every task of the
    app is async and not isolated, else 16); ``lease`` is how long a job may go without a heartbeat
    before another process recovers it (>= 2 s); ``grace`` is how long a graceful stop waits
    for running jobs; ``burst`` stops the worker once no job is queued, due or running here
    (jobs due later are left for later);
    ``scheduler`` runs the periodic tasks' scheduler in this worker (the default);
    ``connect_timeout`` (seconds; default: forever) bounds how long ``run()`` retries an
    unreachable backend at start before raising ``BackendUnavailable``; ``lease_share``
    tells a supervising process the jobs held here, so it renews their leases too (``duly
    worker --processes P`` gives its children one: see ``duly._worker.leases``);
    ``max_jobs`` / ``max_memory`` (MB) retire the worker after that many started jobs or
    above that resident memory: it stops claiming, finishes what it runs as a graceful stop
    does, and ``run()`` returns with ``retired`` saying why (``duly worker
    --max-jobs-per-child`` / ``--max-memory-per-child``: its supervisor starts a new process).
    """

    def __init__(
        self,
        app: App,
        *,
        queues: Sequence[str] | None = None,
        concurrency: int | None = None,
        lease: float = 30.0,
        grace: float = 30.0,
        poll: float = 1.0,
        burst: bool = False,
        scheduler: bool = True,
        install_signal_handlers: bool = True,
        name: str | None = None,
        connect_timeout: float | None = None,
        lease_share: LeaseShare | None = None,
        max_jobs: int | None = None,
        max_memory: float | None = None,
    ) -> None:
        if concurrency is None:
            concurrency = default_concurrency(app.registry)
        if concurrency < 1:
            raise ConfigurationError("concurrency must be >= 1")
        if lease < MIN_LEASE:
            raise ConfigurationError(f"lease must be >= {MIN_LEASE:g} seconds")
        if grace < 0 or poll <= 0:
            raise ConfigurationError("grace must be >= 0 and poll > 0")
        self.app = app
        self.queues, self._weights = parse_queues(queues or app.registry.queues())
        self.concurrency = concurrency
        self.lease = float(lease)
        self.grace = float(grace)
        self.poll = float(poll)
        self.burst = burst
        self.connect_timeout = connect_timeout
        self._lease_share = lease_share
        recycling = Recycling(max_jobs, max_memory)
        self._recycling = None if max_jobs is None and max_memory is None else recycling
        #: Why this worker retired (``max_jobs`` / ``max_memory``), or None.
        self.retired: str | None = None
        self.scheduler = Scheduler(app) if scheduler else None  # stored schedules too
        self.install_signal_handlers = install_signal_handlers
        self.id = name or f"{socket.gethostname()}:{os.getpid()}:{new_id()[-6:]}"
        self.stats = WorkerStats()
        self._report, self._stops = Reporter(self.id, app.clock, self.stats), StopRequests()
        self._running: dict[str, tuple[Execution, asyncio.Task[None]]] = {}
        #: Running jobs that lost a worker before (while any runs, nothing more is claimed).
        self._suspects = 0
        # The collaborators of a run, built by run() once the backend is open.
        self._outcomes: Outcomes
        self._admission: Admission
        self._maintenance: Maintenance
        self._slot_freed = asyncio.Event()
        self._stopping = asyncio.Event()
        self._stop_requested = False
        #: ``duly.current_job().stopping`` of the runs here: set once a stop was requested.
        self._draining = StopFlag()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._backend: Backend | None = None
        #: The backend, when it hands jobs to idle workers directly (not in burst mode).
        self._handoff: Handoff | None = None
        #: Whether this worker may be registered idle (hand-off): its next claim withdraws.
        self._registered = True
        self._threads: ThreadRunner | None = None
        #: The child processes of isolated tasks (none is started before the first such run).
        self._isolation = IsolatedPool(concurrency)

    # -- control ---------------------------------------------------------------------------
    def stop(self) -> None:
        """Ask for a graceful stop (thread-safe)."""
        self._stop_requested = True
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._set_stopping)

    def _set_stopping(self) -> None:
        self._stopping.set()
        self._draining.requested = True
        self._slot_freed.set()  # the fetch loop waits on it while every slot is taken

    @property
    def stopping(self) -> bool:
        """True once a stop was requested."""
        return self._stopping.is_set()

    @property
    def in_flight(self) -> int:
        """Jobs running now."""
        return len(self._running)

    # -- main ------------------------------------------------------------------------------
    async def run(self) -> None:
        """Work until ``stop()``, a signal, or (with ``burst``) no work is left."""
        self._loop = asyncio.get_running_loop()
        self._slot_freed = asyncio.Event()
        self._stopping = asyncio.Event()
        if self._stop_requested:
            self._stopping.set()
        self._threads = ThreadRunner(self.concurrency)
        self._install_signals()
        self._backend = await self._connect()
        if HANDOFF.offered_by(self._backend) and not self.burst:
            self._handoff = HANDOFF.of(self._backend)
        self._assemble(self._backend)
        await logged(
            self._backend.register_worker(
                self.id,
                self.app.clock.now(),
                {
                    "host": socket.gethostname(),
                    "pid": os.getpid(),
                    "queues": self.queues,
                    "concurrency": self.concurrency,
                    "lease": self.lease,
                },
            ),
            "register",
        )
        log.info(
            "worker %s started: queues=%s concurrency=%d lease=%gs",
            self.id,
            ",".join(self.queues),
            self.concurrency,
            self.lease,
        )
        duties = self._maintenance
        ack = asyncio.create_task(self._outcomes.loop(), name="duly-ack")
        helpers = [
            asyncio.create_task(duties.heartbeat_loop(), name="duly-heartbeat"),
            asyncio.create_task(duties.maintenance_loop(), name="duly-maintenance"),
        ]
        if self.scheduler is not None:
            helpers.append(asyncio.create_task(duties.scheduler_loop(), name="duly-scheduler"))
        try:
            # Before the first claim (PRODUCT §17, seed 002): the jobs of a dead worker go back
            # to the head of their queues and run before newer ones.
            await duties.recover()
            await self._fetch_loop()
            await self._withdraw()
            await self._drain()
        finally:
            # The ack loop is never cancelled mid-report (an outcome applied by the backend but
            # cancelled client-side would be sent twice, or, with redis-py's wait_for on 3.11,
            # the cancel can be swallowed): it reports what is left, then ends.
            self._outcomes.close(time.monotonic() + max(self.grace, 5.0))
            for helper in helpers:
                helper.cancel()
            await _until_cancelled(helpers)
            await asyncio.gather(ack, *helpers, return_exceptions=True)
            if self._lease_share is not None:
                self._lease_share.bye(self.id)
            with contextlib.suppress(DulyError, OSError):
                await self._backend.unregister_worker(self.id)
            self._threads.shutdown()
            await self._isolation.close()
            self._remove_signals()
            log.info("worker %s stopped", self.id)

    def _assemble(self, backend: Backend) -> None:
        """Build this run's collaborators, each given what it uses (not the worker)."""
        app = self.app
        runs = ProgressWriter(backend, self.id, lambda: [e for e, _ in self._running.values()])
        self._outcomes = Outcomes(
            backend, app.clock, worker=self.id, hooks=app.hooks, reporter=self._report, runs=runs
        )
        self._admission = Admission(
            backend,
            app.clock,
            worker=self.id,
            tasks=app.tasks,
            stats=self.stats,
            defer_to=self._outcomes.put,
        )
        self._maintenance = Maintenance(
            backend,
            app.clock,
            worker=self.id,
            lease=self.lease,
            retention=Retention(
                app.max_lost, app.failed_retention, app.stats_retention, app.retention
            ),
            hooks=app.hooks,
            reporter=self._report,
            held=self._held,
            share=None if (share := self._lease_share) is None else partial(share.held, self.id),
            stop_runs=self._stop_runs,
            report_failure=self._outcomes.report_failure,
            freshness=lambda now: sweep(app, backend, now),
            scheduler=self.scheduler,
            runs=runs,
        )

    def _held(self) -> list[str]:
        """The jobs whose leases this worker keeps: running, or run and not yet reported."""
        return [*self._running, *self._outcomes.unacked]

    def _stop_runs(self, job_ids: list[str]) -> None:
        """The backend took these jobs back (a cancel, or a recovery elsewhere): stop their
        runs here."""
        for job_id in job_ids:
            if (entry := self._running.get(job_id)) is not None:
                task = self.app.tasks.get(entry[0].record.task)
                # An isolated run is stopped as an async one is: its child is killed.
                stoppable = task is not None and (task.is_async or task.config.isolated)
                self._stops.request(*entry, is_async=stoppable)

    async def _connect(self) -> Backend:
        delay = 0.1
        limit = float("inf") if self.connect_timeout is None else self.connect_timeout
        give_up = time.monotonic() + limit
        while True:
            try:
                return await self.app.backend()
            except BackendUnavailable as exc:
                left = give_up - time.monotonic()
                if self.stopping or left <= 0:
                    self._undo_setup()
                    if self.stopping:
                        raise
                    raise BackendUnavailable(f"{exc} (gave up after {limit:g}s)") from exc
                log.warning("backend unavailable (%s); retrying in %.1fs", exc, delay)
                await self._sleep(min(delay, left))
                delay = min(delay * 2, 10.0)
            except BaseException:  # e.g. StorageTooNew: data of a newer duly
                self._undo_setup()
                raise

    def _undo_setup(self) -> None:
        """run() has not reached its finally: undo its set-up."""
        self._remove_signals()
        if self._threads is not None:
            self._threads.shutdown()

    async def _sleep(self, seconds: float) -> None:
        """Sleep, waking early on stop."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._stopping.wait()

    # -- fetch -----------------------------------------------------------------------------
    async def _fetch_loop(self) -> None:
        assert self._backend is not None
        backoff = 0.1
        while not self.stopping:
            free = self.concurrency - len(self._running)
            # A job that lost its worker may kill this process too: while one runs here, claim
            # nothing more, so no job claimed later shares its fate (the backend hands it out
            # alone in its claim; this makes "alone" hold for the process).
            if self._suspects:
                free = 0
            if self._recycling is not None and self._retire():
                break
            if free <= 0:
                self._slot_freed.clear()
                # Waited on directly (a stop sets it too): the claim then goes out in the same
                # loop turn as the report of the jobs that freed the slots, and the backend can
                # send both in one round trip.
                await self._slot_freed.wait()
                # Jobs finishing together free their slots within a few loop iterations:
                # let them, so one claim fills several slots instead of one claim per slot.
                await asyncio.sleep(0)
                continue
            if self._recycling is not None:
                free = self._recycling.budget(self.stats.claimed, free)
            try:
                records = await self._claim(min(free, BATCH_LIMIT))
                backoff = 0.1
            except BackendUnavailable as exc:
                log.warning("claim: backend unavailable (%s); retrying in %.1fs", exc, backoff)
                await self._sleep(backoff + random.uniform(0, backoff))
                backoff = min(backoff * 2, 10.0)
                continue
            if not records and self.burst and self._idle():
                await self._maintenance.promote()  # a last look, so no due job is left behind
                records = await self._claim(min(free, BATCH_LIMIT))
                if not records and self._idle():
                    return
            if not records:
                records = await self._wait_for_work()
            if records:
                await self._begin(records)

    def _retire(self) -> bool:
        """Whether this worker retires now (recycling): it then stops as on a signal."""
        assert self._recycling is not None
        reason = self._recycling.reason(self.stats.claimed)
        if reason is None:
            return False
        self.retired = reason
        log.info(
            "worker %s retiring: %s; finishing %d running jobs", self.id, reason, len(self._running)
        )
        self._set_stopping()
        return True

    async def _begin(self, records: list[JobRecord]) -> None:
        """Start the claimed jobs their rate limits admit now (the others are deferred)."""
        admitted = await self._admission.admit(records)
        if self._lease_share is not None and admitted:
            # Before their code runs: one of them may hold the GIL from its first line on.
            self._lease_share.add(self.id, [record.id for record in admitted])
        hooks = self.app.hooks
        watching = admitted and hooks.watching("started_batch")
        if watching and (waiting := hooks.fire("started_batch", admitted)) is not None:
            await waiting
        for record in admitted:
            self._start(record)

    async def _claim(self, limit: int) -> list[JobRecord]:
        """Claim up to ``limit`` jobs; with hand-off, idle mode (registered idle if none)."""
        assert self._backend is not None
        now = self.app.clock.now()
        order, lease_until = self._claim_order(), now + self.lease
        if self._handoff is None:
            records = await self._backend.claim(self.id, order, limit, now, lease_until)
            return await runnable(self.app, records)
        idle_for = self._poll_timeout() + IDLE_SLACK
        withdraw = self._registered
        self._registered = True  # until the reply says otherwise: a lost one may have registered
        records = await runnable(
            self.app,
            await self._handoff.claim_idle(
                self.id, order, limit, now, lease_until, idle_for, withdraw
            ),
        )
        self._registered = not records
        return records

    async def _wait_for_work(self) -> list[JobRecord]:
        """Wait for a wake-up, a poll's time or a stop; returns the jobs handed to this worker
        meanwhile (hand-off), which run like claimed ones (they are ``running`` here)."""
        assert self._backend is not None
        if self._handoff is None:
            wait = self._backend.wait_for_work(self.queues, self._poll_timeout())
            await self._wait_any(wait, None)
            return []
        try:
            records = await self._handoff.wait(
                self.id, self.queues, self._poll_timeout(), self._stopping
            )
        except BackendUnavailable as exc:
            log.warning("waiting for work: %s", exc)
            await self._sleep(1.0)
            return []
        if records:  # it used the registration up (one job per registration)
            self._registered = False
        return records

    async def _withdraw(self) -> None:
        """Stopping: end the idle registration and run the jobs handed here meanwhile (the
        drain that follows lets them finish within the grace period, or hands them back)."""
        if self._handoff is None:
            return
        try:
            records = await self._handoff.withdraw(self.id, self.queues)
        except BackendUnavailable as exc:  # they are running here: recovered after the lease
            log.warning("withdraw: backend unavailable: %s", exc)
            return
        if records:
            await self._begin(records)

    def _claim_order(self) -> list[str]:
        """The order to try the queues in for one claim: as given, or weighted at random (a
        queue of weight w comes first with probability w / total; Efraimidis-Spirakis)."""
        if self._weights is None:
            return self.queues
        keyed = [
            (random.random() ** (1.0 / w), q)
            for q, w in zip(self.queues, self._weights, strict=True)
        ]
        return [q for _, q in sorted(keyed, reverse=True)]

    def _poll_timeout(self) -> float:
        if self.burst:
            return min(self.poll, PROMOTE_INTERVAL)
        return self.poll

    def _idle(self) -> bool:
        """Nothing running or unreported here, and no scheduled/retrying job due yet."""
        if self._running or self._outcomes.unacked:
            return False
        next_due = self._maintenance.next_due
        return next_due is None or next_due > self.app.clock.now()

    async def _wait_any(self, coro: Any, timeout: float | None) -> None:
        """Await ``coro`` but return at once when a stop is requested."""
        work = asyncio.ensure_future(coro)
        stop = asyncio.ensure_future(self._stopping.wait())
        try:
            await asyncio.wait({work, stop}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for fut in (work, stop):
                if not fut.done():
                    fut.cancel()
            await asyncio.gather(work, stop, return_exceptions=True)
        if work.done() and not work.cancelled() and work.exception() is not None:
            exc = work.exception()
            if isinstance(exc, BackendUnavailable):
                log.warning("waiting for work: %s", exc)
                await self._sleep(1.0)
            elif exc is not None:
                raise exc

    # -- run -------------------------------------------------------------------------------
    def _start(self, record: JobRecord) -> None:
        self.stats.claimed += 1
        execution = Execution(record, self.id, draining=self._draining)
        context = self._stops.run_context(record.id)
        task = asyncio.create_task(
            self._run_one(execution), name=f"duly-job-{record.id}", context=context
        )
        self._running[record.id] = (execution, task)
        if record.lost:
            self._suspects += 1

    async def _run_one(self, execution: Execution) -> None:
        assert self._threads is not None
        job_id = execution.record.id
        try:
            hooks = self.app.hooks
            if hooks.watching("started") and (waiting := hooks.fire("started", execution.record)):
                await waiting
            outcome, error = await execution.run(self.app, self._threads, self._isolation)
        except asyncio.CancelledError:
            if execution.handed_back:
                outcome, error = Outcome(job_id, "release", run_at=self.app.clock.now()), None
            else:
                outcome = None
        except Exception as exc:  # a bug in duly itself: record it on the job, keep running
            log.exception("internal error running job %s", job_id)
            outcome = failure_outcome(self.app, None, execution.record, exc, self.app.clock.now())
            error = exc
        finally:
            self._forget(job_id)
        if outcome is None or execution.abandoned:
            return
        if execution.deferred and outcome.kind == "release":
            self.stats.deferred += 1
            outcome = await self._admission.throttled(execution, outcome)
        self._outcomes.put(execution, outcome, error)

    def _forget(self, job_id: str) -> None:
        """The job no longer runs here: free its slot."""
        entry = self._running.pop(job_id, None)
        self._stops.forget(job_id)
        if entry is not None and entry[0].record.lost:
            self._suspects -= 1
        self._slot_freed.set()

    # -- stopping --------------------------------------------------------------------------
    async def _drain(self) -> None:
        """Let running jobs finish within the grace period, then hand the rest back."""
        if self._running:
            log.info(
                "stopping: waiting up to %gs for %d running jobs", self.grace, len(self._running)
            )
            tasks = [task for _, task in self._running.values()]
            await asyncio.wait(tasks, timeout=self.grace)
        for execution, task in list(self._running.values()):
            execution.handed_back = True
            task.cancel()
        if self._running:
            await asyncio.wait([task for _, task in self._running.values()], timeout=5)
        # Sync jobs stuck in their thread cannot be interrupted: hand them back anyway.
        for job_id, (execution, _task) in list(self._running.items()):
            execution.abandoned = True
            self._forget(job_id)
            release = Outcome(job_id, "release", run_at=self.app.clock.now())
            self._outcomes.pending.append((execution, release, None))

    # -- signals ---------------------------------------------------------------------------
    def _install_signals(self) -> None:
        if not self.install_signal_handlers:
            return
        if threading.current_thread() is not threading.main_thread():
            return
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(signum, self._on_signal, signum)

    def _remove_signals(self) -> None:
        if not self.install_signal_handlers or self._loop is None:
            return
        if threading.current_thread() is not threading.main_thread():
            return
        for signum in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                self._loop.remove_signal_handler(signum)

    def _on_signal(self, signum: int) -> None:
        if self.stopping:
            log.warning("second signal: handing running jobs back now")
            self.grace = 0
            for execution, task in self._running.values():
                execution.handed_back = True
                task.cancel()
            return
        log.info(
            "received %s: finishing running jobs (grace %gs)",
            signal.Signals(signum).name,
            self.grace,
        )
        self._set_stopping()


async def _until_cancelled(tasks: list[asyncio.Task[None]]) -> None:
    """Wait for ``tasks`` to end, cancelling again each second those still running: a cancel
    swallowed by a backend call in flight (redis-py's reads on 3.11) left a helper looping and
    the worker's stop waiting forever."""
    while tasks:
        _, pending = await asyncio.wait(tasks, timeout=1.0)
        if not pending:
            return
        for task in pending:
            task.cancel()
