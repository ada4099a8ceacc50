"""App: the task registry bound to one backend URL, and every sync/async entry point."""

from __future__ import annotations

import asyncio
import os
import weakref
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, Unpack, cast, overload

from duly._app_features import AppFeatures
from duly._app_queries import AppQueries
from duly._clock import Clock, SystemClock
from duly._decorators import PeriodicDecorator, TaskDecorator, WatchDecorator
from duly._errors import ConfigurationError, ConfigurationTypeError
from duly._freshness import Mirror, Staleness
from duly._hooks import Hook, Hooks, settle
from duly._job import Job, JobInfo
from duly._limits import refuse_nul
from duly._portal import Portal
from duly._records import STATS_RETENTION, EnqueueResult, NewJob
from duly._registry import Registry, TaskSettings, WatchTaskSettings
from duly._schedule import CatchUp, Overlap
from duly._sealing import Sealer
from duly._task import Signature, Task, build_all, seconds
from duly._transactions import Transactions
from duly._watch import WatchConfig
from duly._workflows import (
    enqueue_dependents,
    has_dependents,
)
from duly.backends import DEFAULT_URL, Backend, backend_from_url
from duly.backends.transactional import TRANSACTIONAL, TransactionalEnqueue

if TYPE_CHECKING:
    from starlette.applications import Starlette

    from duly._worker import Worker

__all__ = ["App", "FailureCallback"]

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")
H = TypeVar("H", bound=Hook)

#: ``callback(job, error)``: a job failed for good. May be sync or async.
FailureCallback = Callable[[JobInfo, BaseException], Awaitable[None] | None]

DEFAULT_MAX_PAYLOAD_BYTES = 1024 * 1024
DEFAULT_RETENTION = timedelta(hours=24)
DEFAULT_FAILED_RETENTION = timedelta(days=7)
#: Task settings a freshness's sync does not take: the scope's state already makes its sync
#: the only one (its job carries no unique key or gate).
_ONE_PER_SCOPE = frozenset(
    {"unique", "unique_until", "unique_ttl", "mutex", "concurrency", "concurrency_key"}
)


class _FailureCallback(Hook):
    """An ``on_failure`` callback as a hook."""

    def __init__(self, callback: FailureCallback) -> None:
        self.callback = callback

    def __repr__(self) -> str:
        return f"<on_failure {self.callback!r}>"

    def failed(self, job: JobInfo, error: BaseException) -> Awaitable[None] | None:
        return self.callback(job, error)


@dataclass
class _LoopBackend:
    backend: Backend
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    ready: bool = False


class App(AppQueries, AppFeatures):
    """A duly application: tasks plus the backend they are stored in.

    ``url`` defaults to ``$DULY_URL``, then ``sqlite:///duly.db``; or give ``backend=`` one you
    built (``duly.backends.backend_from_url`` or a backend class; the App opens one clone of it
    per event loop). ``namespace`` separates several apps on one Redis (key prefix) or
    PostgreSQL (schema). ``retention`` / ``failed_retention``: how long succeeded / failed jobs
    are kept (a task may set its own); ``stats_retention``: how long per-minute counters, and
    the records of workers that vanished, are kept; ``max_lost``: lost runs before a job is
    quarantined; ``clock``: the time source (a ``ManualClock`` in tests); ``transactions``: a
    web framework's transactions, for ``options(on_commit=True)`` and a framework's
    ``connection=`` (see ``duly._transactions``; ``duly.contrib.django`` sets it);
    ``secret_key`` (default ``$DULY_SECRET_KEY``): encrypts the tasks' ``secret=`` arguments
    at rest (``duly._sealing``; needs ``duly[secrets]``).
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        backend: Backend | None = None,
        namespace: str = "duly",
        retention: float | timedelta = DEFAULT_RETENTION,
        failed_retention: float | timedelta = DEFAULT_FAILED_RETENTION,
        stats_retention: float | timedelta = STATS_RETENTION,
        max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
        max_lost: int = 3,
        clock: Clock | None = None,
        transactions: Transactions | None = None,
        secret_key: str | None = None,
    ) -> None:
        if backend is None:
            #: The URL as given (duly's own query parameters such as ``?namespace=`` included).
            self.url = url or os.environ.get("DULY_URL") or DEFAULT_URL
            # Validate the URL now: a typo should fail at start-up, not at the first enqueue.
            backend = backend_from_url(self.url, namespace)
        elif url is not None:
            raise ConfigurationError("give App a url or a backend, not both")
        elif not isinstance(backend, Backend):
            raise ConfigurationTypeError(
                f"backend= takes a duly backend (see duly.backends), got {backend!r}"
            )
        else:
            self.url = backend.url
        #: Makes the backend of each event loop (``clone()``) and serves blocking enqueues.
        self._template: Backend = backend
        self.namespace = backend.namespace
        self.retention = seconds(retention, "retention")
        self.failed_retention = seconds(failed_retention, "failed_retention")
        self.stats_retention = seconds(stats_retention, "stats_retention")
        if self.stats_retention < 60:
            raise ConfigurationError("stats_retention must be at least a minute")
        if max_payload_bytes <= 0:
            raise ConfigurationError("max_payload_bytes must be > 0")
        self.max_payload_bytes = max_payload_bytes
        if max_lost < 1:
            raise ConfigurationError("max_lost must be >= 1")
        self.max_lost = max_lost
        self.clock: Clock = clock or SystemClock()
        if transactions is not None and not isinstance(transactions, Transactions):
            kind = type(transactions).__name__
            raise ConfigurationTypeError(
                f"transactions= takes a duly.transactions.Transactions, not {kind}"
            )
        self.transactions = transactions
        #: Seals secret arguments at rest (``secret_key=``, else ``$DULY_SECRET_KEY``; see
        #: ``duly._sealing``), or None.
        self.sealer = Sealer.from_key(secret_key or os.environ.get("DULY_SECRET_KEY"))
        self.registry = Registry()
        #: The registered tasks by name.
        self.tasks = self.registry.tasks
        #: Freshness mirrors by name (``app.freshness``).
        self.mirrors: dict[str, Mirror] = {}
        #: Hooks called on job events (``add_hook``); ``on_failure`` callbacks are hooks.
        self.hooks = Hooks()
        self._portal = Portal(at_exit=self.close)  # a script may forget close()
        self._backends: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopBackend] = (
            weakref.WeakKeyDictionary()
        )

    def __repr__(self) -> str:
        return f"<duly.App {self.url!r} tasks={len(self.tasks)}>"

    # -- registration ----------------------------------------------------------------------
    @overload
    def task(self, fn: Callable[P, Coroutine[Any, Any, R]], /) -> Task[P, R]: ...
    @overload
    def task(self, fn: Callable[P, R], /) -> Task[P, R]: ...
    @overload
    def task(self, fn: None = None, /, **settings: Unpack[TaskSettings]) -> TaskDecorator: ...
    def task(
        self, fn: Callable[..., Any] | None = None, /, **settings: Unpack[TaskSettings]
    ) -> Any:
        """Register a function (``def`` or ``async def``) as a task.

        ``retries`` (default 3) with ``backoff`` (default ``Backoff(base=1, cap=300)``;
        ``Backoff.constant(s)``, ``Backoff.linear(step, cap)`` or a callable ``(attempt,
        error) -> seconds | timedelta``), ``retry_on`` (exception types worth retrying;
        default any Exception), ``timeout`` (seconds), ``queue``, ``priority``, ``retention``
        / ``failed_retention`` (how long finished jobs are kept), ``name`` (default
        ``module.qualname``), ``retry_from_start`` (after a failure, run again from the start,
        not from the job's last ``checkpoint``), ``isolated`` (each run in a child process of
        the worker's pool: a crash, a timeout or a cancel ends that child only; a module-level
        function; see ``duly._worker.isolation``), ``expires`` (seconds: a job not started
        that long after its enqueue never runs; it ends cancelled with ``JobExpired``).

        Concurrency control (templates over the parameters, e.g. ``"{team_id}:{scope}"``):
        ``unique`` (or ``True`` for all arguments): while such a job is scheduled, queued or
        running, enqueue returns it (``job.deduplicated``); held until ``unique_until``
        ("finish" or "start"), at most ``unique_ttl``. ``debounce`` (seconds, with
        ``unique``): each job waits that long, and an enqueue that finds it still waiting
        pushes it back and replaces its arguments. ``mutex``: one running job per key, the
        others wait. ``concurrency=N`` with ``concurrency_key``: N running per key.
        ``rate_limit="10/s"`` (``/m``, ``/h``, ``/d``) with ``rate_key``: starts per period
        across all workers; jobs over the limit are deferred, not failed.
        """
        if fn is not None:
            return self.registry.register(self, fn, settings)
        return TaskDecorator(self, settings)

    def periodic(
        self,
        *,
        every: float | timedelta | None = None,
        cron: str | None = None,
        tz: str = "UTC",
        catch_up: CatchUp = "one",
        overlap: Overlap = "skip",
        **task_settings: Unpack[TaskSettings],
    ) -> PeriodicDecorator:
        """Make a no-argument function a task AND run it on a schedule.

        ``every`` (seconds or timedelta; ticks at multiples of it since the epoch) or ``cron``
        (croniter syntax, evaluated in ``tz``). Each tick enqueues exactly one job however many
        schedulers run (every worker runs one; ``duly scheduler`` runs one alone).
        ``catch_up`` after downtime: ``"one"`` (default) runs the latest missed tick once,
        ``"all"`` every missed tick, ``"skip"`` none. ``overlap``: a tick while the previous
        tick's job still waits or runs is skipped (``"skip"``, the default: logged and
        counted, see ``app.schedules()``) or queued behind it (``"queue"``). Task settings
        (``queue``, ``retries``, ``timeout``, ``name``...) apply as in ``@app.task``.
        """
        return PeriodicDecorator(self, every, cron, tz, catch_up, overlap, task_settings)

    def watch(
        self,
        *,
        max_checks: int | None = None,
        horizon: float | timedelta | None = None,
        timeout: float | timedelta | None = None,
        slot: float | timedelta | None = None,
        **task_settings: Unpack[WatchTaskSettings],
    ) -> WatchDecorator:
        """Make a function a durable future check (PRODUCT §6).

        The function gets the watch's arguments and returns when to check again (``datetime``
        or ``timedelta``) or ``None`` when done. ``fn.start(...)`` begins a watch (one per
        arguments), ``fn.options(at=... | delay=...).start(...)`` sets the first check,
        ``fn.stop(...)`` ends it. Guards end a watch with a recorded reason: more than
        ``max_checks`` checks, a next time in the past or beyond ``horizon`` (from the start),
        a check over ``timeout`` seconds. ``slot`` rounds check times up to a multiple of it.
        Task settings (``queue``, ``retries``, ``retention``...) apply as in ``@app.task``.
        """
        config = WatchConfig(
            max_checks=max_checks,
            horizon=None if horizon is None else seconds(horizon, "horizon"),
            slot=None if slot is None else seconds(slot, "slot"),
        )
        # Every watch setting is a task setting; the guard's timeout is the task's timeout.
        settings = cast(TaskSettings, {**task_settings, "timeout": timeout})
        return WatchDecorator(self, config, settings)

    def freshness(
        self,
        name: str,
        /,
        *,
        sync: Callable[..., Any],
        max_staleness: Staleness,
        full_every: float | timedelta = timedelta(hours=1),
        max_backoff: float | timedelta = timedelta(minutes=5),
        **task_settings: Unpack[TaskSettings],
    ) -> Mirror:
        """Keep a mirror fresh against a staleness SLA (PRODUCT §7); see ``duly._freshness``.

        ``sync(scope, full)`` (``def`` or ``async def``) pulls one scope from the upstream; it
        becomes the task ``freshness.<name>`` (task settings such as ``rate_limit``,
        ``retries`` (default 0: failures back off per scope instead), ``timeout``, ``queue``
        apply). ``max_staleness`` is a timedelta or a function ``scope -> timedelta``.
        """
        if not isinstance(name, str) or not name or "\x1f" in name:
            raise ConfigurationError(f"a freshness name is a non-empty str, got {name!r}")
        refuse_nul(name, f"a freshness name ({name!r})")
        if name in self.mirrors:
            raise ConfigurationError(f"a freshness named {name!r} is already registered")
        given = sorted(set(task_settings) & _ONE_PER_SCOPE)
        if given:
            raise ConfigurationError(
                f"a freshness has one sync per scope already; drop {', '.join(given)}"
            )
        settings = cast(TaskSettings, {"retries": 0, "name": f"freshness.{name}", **task_settings})
        task = self.registry.register(self, sync, settings)
        mirror = Mirror(
            self,
            name,
            sync,
            max_staleness=max_staleness,
            full_every=full_every,
            max_backoff=max_backoff,
            task=task,
        )
        self.mirrors[name] = mirror
        return mirror

    def on_failure(self, callback: FailureCallback) -> FailureCallback:
        """Call ``callback(job_info, error)`` whenever a job fails for good (usable as a
        decorator). Errors raised by callbacks are logged, never lost jobs."""
        self.hooks.add(_FailureCallback(callback))
        return callback

    def add_hook(self, hook: H) -> H:
        """Call ``hook``'s methods on job events from now on (see ``duly.Hook``); returns it."""
        self.hooks.add(hook)
        return hook

    # -- backend access --------------------------------------------------------------------
    async def backend(self) -> Backend:
        """The opened backend of the running event loop (one per loop)."""
        loop = asyncio.get_running_loop()
        entry = self._backends.get(loop)
        if entry is None:
            entry = _LoopBackend(self._template.clone())
            self._backends[loop] = entry
        if not entry.ready:
            async with entry.lock:
                if not entry.ready:
                    await entry.backend.open()
                    entry.ready = True
        return entry.backend

    def run_sync(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the App's private event loop and return its result: how every sync
        twin (``get_job``, ``enqueue``...) works, from scripts, threads or a running loop."""
        return self._portal.run(coro)

    _sync = run_sync  # the name scripts and tests of earlier releases call

    async def aclose(self) -> None:
        """Close the running loop's backend connections."""
        entry = self._backends.pop(asyncio.get_running_loop(), None)
        if entry is not None:
            await entry.backend.close()

    def close(self) -> None:
        """Close the connections used by sync calls."""
        self._template.close_blocking()
        self._portal.stop(self.aclose())

    def __enter__(self) -> App:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- enqueue ---------------------------------------------------------------------------
    def _transactional(
        self, signatures: Sequence[Signature]
    ) -> tuple[TransactionalEnqueue, Any] | None:
        """The backend and the caller's connection of a transactional enqueue, or None."""
        connections = {id(s.options.connection): s.options.connection for s in signatures}
        if len(connections) > 1:
            raise ValueError("enqueue_many: all signatures must share one connection= (or none)")
        connection = next(iter(connections.values()), None)
        if connection is None:
            return None
        if self.transactions is not None:
            connection = self.transactions.driver_connection(connection)
        if not TRANSACTIONAL.offered_by(self._template):
            raise ConfigurationError(
                "connection= (transactional enqueue) needs the PostgreSQL backend"
            )
        return TRANSACTIONAL.of(self._template), connection

    def _build(self, signatures: Sequence[Signature]) -> list[NewJob]:
        built = build_all(signatures, self.clock.now())
        if self.hooks.watching("enqueuing"):
            self.hooks.enqueuing(built)  # in the caller's context (trace context)
        return built

    def _jobs(self, built: list[NewJob], results: Sequence[EnqueueResult]) -> list[Job[Any]]:
        return [Job(self, r.id, r.deduplicated) for r in results]

    def enqueue_many(self, signatures: Iterable[Signature]) -> list[Job[Any]]:
        """Store many jobs in one round trip per batch: ``app.enqueue_many([t.s(1), t.s(2)])``.

        All are validated before any is stored. Returns the handles in order.
        """
        sigs = self._check_signatures(signatures)
        if not sigs:
            return []
        built = self._build(sigs)
        if self._after_commit(sigs, built):
            return [Job(self, j.id) for j in built]
        return self._jobs(built, self._store(sigs, built))

    def _store(self, sigs: Sequence[Signature], built: list[NewJob]) -> list[EnqueueResult]:
        transactional = self._transactional(sigs)
        if transactional is not None:
            backend, connection = transactional
            if hasattr(connection, "__aenter__"):
                raise TypeError("an async connection needs enqueue_async / enqueue_many_async")
            results = backend.enqueue(connection, built)
        elif has_dependents(built):
            results = self.run_sync(enqueue_dependents(self, built))
        else:
            results = self._template.enqueue_blocking(built)
        if self.hooks.watching("enqueued"):
            pending = self.hooks.call("enqueued", built, results)
            if pending:
                self.run_sync(settle("enqueued", pending))
        return results

    def _after_commit(self, sigs: Sequence[Signature], built: list[NewJob]) -> bool:
        """With ``on_commit=True``: store ``built`` once the caller's transaction commits (the
        handles returned now carry the ids the jobs will have); False otherwise."""
        wanted = {s.options.on_commit for s in sigs}
        if wanted == {False}:
            return False
        if len(wanted) > 1:
            raise ValueError("enqueue_many: all signatures must share on_commit= (or none)")
        if self.transactions is None:
            raise ConfigurationError(
                "on_commit=True needs an App that knows your framework's transactions "
                "(duly.contrib.django's app, or App(transactions=...))"
            )
        self.transactions.on_commit(lambda: self._store(sigs, built))
        return True

    async def enqueue_many_async(self, signatures: Iterable[Signature]) -> list[Job[Any]]:
        """Async twin of ``enqueue_many``."""
        sigs = self._check_signatures(signatures)
        if not sigs:
            return []
        built = self._build(sigs)
        if self._after_commit(sigs, built):  # the framework runs the callback, sync
            return [Job(self, j.id) for j in built]
        transactional = self._transactional(sigs)
        if transactional is not None:
            backend, connection = transactional
            results = await backend.enqueue_async(connection, built)
        else:
            results = await self.enqueue_built(built)
        if self.hooks.watching("enqueued"):
            await self.hooks.emit("enqueued", built, results)
        return self._jobs(built, results)

    async def enqueue_built(self, built: list[NewJob]) -> list[EnqueueResult]:
        """Store jobs already built (``NewJob``), without hooks: the seam of the feature
        modules that build their own jobs (webhooks). Application code calls
        ``enqueue_many``."""
        if has_dependents(built):
            return await enqueue_dependents(self, built)
        backend = await self.backend()
        return list(await backend.enqueue(built))

    def _check_signatures(self, signatures: Iterable[Signature]) -> list[Signature]:
        sigs = list(signatures)
        for sig in sigs:
            if not isinstance(sig, Signature):
                raise TypeError(f"enqueue_many takes task.s(...) signatures, got {sig!r}")
            if sig.task.app is not self:
                raise ValueError(f"{sig!r} belongs to another App")
        return sigs

    # -- maintenance -----------------------------------------------------------------------
    def migrate(self) -> list[int]:
        """Apply pending schema migrations (SQL backends); the versions applied."""
        return self.run_sync(self._migrate())

    async def _migrate(self) -> list[int]:
        backend = self._template.clone()
        try:
            return await backend.migrate()
        finally:
            await backend.close()

    def ping(self) -> None:
        """Raise ``BackendUnavailable`` unless the backend answers."""
        self.run_sync(self._ping())

    async def _ping(self) -> None:
        await (await self.backend()).ping()

    # -- HTTP (duly.http) -------------------------------------------------------------------
    def asgi(
        self,
        read_tokens: Iterable[str] | None = None,
        admin_tokens: Iterable[str] | None = None,
        **options: Any,
    ) -> Starlette:
        """The HTTP API and dashboard as a Starlette app (needs ``duly[dashboard]``): read
        tokens may GET, admin tokens may also POST. Mount it anywhere. See ``docs/http.md``."""
        from duly._http import build_asgi

        return build_asgi(self, read_tokens, admin_tokens, **options)

    # -- running ---------------------------------------------------------------------------
    def worker(self, **options: Any) -> Worker:
        """A ``duly.Worker`` for this app (see its options); ``await worker.run()``."""
        from duly._worker import Worker

        return Worker(self, **options)
