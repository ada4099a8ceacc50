"""Tasks: functions registered on an App, enqueued by name, typed by their signature."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, TypeVar

from duly._errors import ConfigurationError, ConfigurationTypeError
from duly._ids import new_id, new_ids
from duly._limits import Limits, refuse_nul
from duly._payload import Links, with_links
from duly._records import JobRecord, NewJob, Outcome
from duly._retry import Backoff, RetryDelay, check_backoff
from duly._secrets import scrub_exception, secret_values
from duly._serialization import CallSpec

if TYPE_CHECKING:
    from duly._job import Job
    from duly._ports import AppPort

__all__ = ["EnqueueOptions", "Signature", "Task", "TaskConfig", "after_ids"]

P = ParamSpec("P")
R = TypeVar("R")

PRIORITY_RANGE = range(-1000, 1001)
_QUEUE_NAME = re.compile(r"^[A-Za-z0-9_.\-]{1,100}$")
_MAX_KEY_LENGTH = 512
#: A caller-chosen job id (``options(id=...)``): what URLs, keys and listings carry as is.
_JOB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:\-]{0,127}")
DEFAULT_BACKOFF = Backoff(base=1.0, cap=300.0)


def seconds(value: float | timedelta, what: str) -> float:
    """``value`` in seconds; a clear ValueError for negative or non-numeric input."""
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigurationTypeError(
            f"{what} must be seconds (int/float) or a timedelta, got {value!r}"
        )
    if value < 0:
        raise ConfigurationError(f"{what} must be >= 0, got {value!r}")
    return float(value)


def check_queue(queue: str) -> str:
    """Validate a queue name (letters, digits, ``_ . -``; at most 100 characters)."""
    if isinstance(queue, str):
        refuse_nul(queue, f"a queue name ({queue!r})")
    if not isinstance(queue, str) or not _QUEUE_NAME.match(queue):
        raise ConfigurationError(
            f"invalid queue name {queue!r}: use 1-100 letters, digits, '_', '.' or '-'"
        )
    return queue


def check_job_id(job_id: str) -> str:
    """Validate a caller-chosen job id: 1-128 letters, digits, ``_ . : -`` (a letter or digit
    first)."""
    if not isinstance(job_id, str):
        raise ConfigurationTypeError(f"id= must be a str, got {job_id!r}")
    if not _JOB_ID.fullmatch(job_id):
        raise ConfigurationError(
            f"invalid job id {job_id!r}: use 1-128 letters, digits, '_', '.', ':' or '-', "
            "starting with a letter or a digit"
        )
    return job_id


def check_priority(priority: int) -> int:
    """Validate a priority (an int from -1000 to 1000; higher runs first)."""
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise ConfigurationTypeError(f"priority must be an int, got {priority!r}")
    if priority not in PRIORITY_RANGE:
        raise ConfigurationError(f"priority must be between -1000 and 1000, got {priority}")
    return priority


@dataclass(frozen=True, slots=True)
class TaskConfig:
    """A task's settings, fixed at registration."""

    name: str
    queue: str = "default"
    retries: int = 3
    #: A ``Backoff`` or a callable ``(attempt, error) -> seconds | timedelta``.
    backoff: Backoff | RetryDelay = DEFAULT_BACKOFF
    timeout: float | None = None
    retry_on: tuple[type[BaseException], ...] = (Exception,)
    retention: float | None = None  # seconds a succeeded job is kept; None = the App's
    failed_retention: float | None = None  # seconds a failed job is kept; None = the App's
    priority: int = 0
    limits: Limits | None = None  # unique / mutex / concurrency / rate limit (duly.limits)
    #: False: a run over ``timeout`` fails at once (a watch's timeout guard), not retried.
    retry_timeouts: bool = True
    #: True: a run after a failure starts from the start (its checkpoint is cleared), not
    #: from ``duly.current_job().cursor``.
    retry_from_start: bool = False
    #: Seconds after its enqueue a job still waiting never starts (``expires=``), or None.
    expires: float | None = None
    #: Seconds a job of this (unique) task waits after its latest enqueue (``debounce=``):
    #: an enqueue that finds it still waiting pushes it back and replaces its arguments.
    debounce: float | None = None
    #: Parameters shown as ``"***"`` outside the worker (``duly._secrets``).
    secret: tuple[str, ...] = ()
    #: The positions at which those parameters may be passed (sealed there too).
    secret_positions: tuple[int, ...] = ()
    #: Each run in a child process of the worker's pool (``duly._worker.isolation``).
    isolated: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ConfigurationError("a task name must be a non-empty string")
        refuse_nul(self.name, f"a task name ({self.name!r})")
        check_queue(self.queue)
        check_priority(self.priority)
        if isinstance(self.retries, bool) or not isinstance(self.retries, int):
            raise ConfigurationTypeError(f"retries must be an int, got {self.retries!r}")
        if self.retries < 0:
            raise ConfigurationError(f"retries must be >= 0, got {self.retries}")
        check_backoff(self.backoff)
        if self.expires is not None and not self.expires > 0:
            raise ConfigurationError(f"expires must be > 0 seconds, got {self.expires!r}")
        if self.timeout is not None and not self.timeout > 0:
            raise ConfigurationError(f"timeout must be > 0 seconds, got {self.timeout!r}")
        if not isinstance(self.retry_from_start, bool):
            raise ConfigurationTypeError(
                f"retry_from_start must be a bool, got {self.retry_from_start!r}"
            )
        for exc_type in self.retry_on:
            if not (isinstance(exc_type, type) and issubclass(exc_type, BaseException)):
                raise ConfigurationTypeError(
                    f"retry_on must hold exception types, got {exc_type!r}"
                )

    @property
    def max_attempts(self) -> int:
        """Runs allowed: the first plus ``retries``."""
        return self.retries + 1

    def new_job(
        self,
        payload: bytes,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        now: float,
        *,
        scheduled_for: float,
        id: str | None = None,
        queue: str | None = None,
        key: str | None = None,
        priority: int | None = None,
        expires_at: float | None = None,
    ) -> NewJob:
        """The one place a job of this task is built: the task's defaults under the call's
        options, and the concurrency fields (unique key, gate) rendered from its arguments."""
        fields = {} if self.limits is None else self.limits.job_fields(args, kwargs, now)
        return NewJob(
            id=id or new_id(),
            task=self.name,
            queue=queue or self.queue,
            payload=payload,
            max_attempts=self.max_attempts,
            key=fields.pop("key", key),
            priority=self.priority if priority is None else priority,
            enqueued_at=now,
            scheduled_for=scheduled_for,
            expires_at=expires_at if expires_at is not None else self._expires_at(now),
            debounce=self.debounce is not None,
            **fields,
        )

    def _expires_at(self, now: float) -> float | None:
        return None if self.expires is None else now + self.expires


@dataclass(frozen=True, slots=True)
class EnqueueOptions:
    """Per-call options of ``task.options(...)``."""

    delay: float | None = None
    at: datetime | None = None
    priority: int | None = None
    key: str | None = None
    queue: str | None = None
    connection: Any = None
    on_commit: bool = False
    #: The job's own id (``check_job_id``), else a new ULID.
    id: str | None = None
    #: The ids of the jobs to wait for (``after=``, see ``after_ids``).
    after: tuple[str, ...] = ()
    #: When a job still waiting never starts: seconds after enqueue, or an aware datetime.
    expires: float | datetime | None = None

    def __post_init__(self) -> None:
        if self.id is not None:
            check_job_id(self.id)
        if isinstance(self.expires, datetime) and self.expires.tzinfo is None:
            raise ConfigurationError("expires= must be timezone-aware (e.g. datetime.now(UTC))")
        if isinstance(self.expires, float) and not self.expires > 0:
            raise ConfigurationError(f"expires= must be > 0 seconds, got {self.expires!r}")
        if self.delay is not None and self.at is not None:
            raise ConfigurationError("give either delay= or at=, not both")
        if self.after and (self.delay is not None or self.at is not None):
            raise ConfigurationError(
                "after= runs the job once its dependencies succeeded: give no delay= or at= with it"
            )
        if self.after and self.connection is not None:
            raise ConfigurationError(
                "after= is not supported with connection= (transactional enqueue)"
            )
        if not isinstance(self.on_commit, bool):
            raise ConfigurationTypeError(f"on_commit must be True or False, got {self.on_commit!r}")
        if self.on_commit and self.connection is not None:
            raise ConfigurationError(
                "give connection= (enqueue inside the transaction) or on_commit=True "
                "(enqueue after it commits), not both"
            )
        if self.at is not None:
            if not isinstance(self.at, datetime):
                raise ConfigurationTypeError(f"at= must be a datetime, got {self.at!r}")
            if self.at.tzinfo is None:
                raise ConfigurationError(
                    "at= must be timezone-aware (e.g. datetime.now(UTC) + ...)"
                )
        if self.priority is not None:
            check_priority(self.priority)
        if self.queue is not None:
            check_queue(self.queue)
        if self.key is not None and (
            not isinstance(self.key, str) or not self.key or len(self.key) > _MAX_KEY_LENGTH
        ):
            raise ConfigurationError(
                f"key must be a non-empty string of at most {_MAX_KEY_LENGTH} chars"
            )
        if self.key is not None:
            refuse_nul(self.key, "key=")


class Signature:
    """A task call to enqueue later or in bulk: ``task.s(*args, **kwargs)``."""

    __slots__ = ("args", "immutable", "kwargs", "options", "task")

    def __init__(
        self,
        task: Task[Any, Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        options: EnqueueOptions,
        immutable: bool = False,
    ) -> None:
        self.task = task
        self.args = args
        self.kwargs = kwargs
        self.options = options
        #: ``task.si(...)``: in a chain, this step does not take the previous step's result.
        self.immutable = immutable

    def __repr__(self) -> str:
        return f"<Signature {self.task.name}{self.args!r}{self.kwargs!r}>"

    def build(self, now: float, id: str | None = None, piped: bool = False) -> NewJob:
        """The job this call becomes at time ``now`` (with id ``id``, else a new one); an
        error it raises never quotes a secret argument's value. ``piped``: a chain step whose
        first argument is the previous step's result, given when it runs."""
        if not self.task.config.secret:
            return self._build(now, id, piped)
        try:
            return self._build(now, id, piped)
        except (ValueError, TypeError) as exc:  # SerializationError, key templates, ...
            texts = secret_values(self.task.app, self.task.name, self.args, self.kwargs)
            scrubbed = scrub_exception(exc, texts)
            if scrubbed is exc:
                raise
            raise scrubbed from None

    def _build(self, now: float, id: str | None, piped: bool) -> NewJob:
        task, opts = self.task, self.options
        config = task.config
        if opts.id is not None:
            if task.name in task.app.registry.schedules:
                raise ConfigurationError(
                    f"{task.name} is periodic: the ids of its jobs hold its ticks, so it "
                    "takes no id="
                )
            id = opts.id
        max_bytes = task.app.max_payload_bytes
        payload = task.spec.encode_call(self.args, self.kwargs, max_bytes, piped)
        sealer = task.app.sealer
        if config.secret and sealer is not None:
            payload = sealer.seal(payload, config.secret_positions, config.secret)
        if opts.after:
            payload = with_links(payload, Links(after=list(opts.after)))
        if opts.at is not None:
            scheduled_for = opts.at.timestamp()
        elif opts.delay:
            scheduled_for = now + opts.delay
        elif config.debounce is not None:
            scheduled_for = now + config.debounce  # the quiet time after the latest call
        else:
            scheduled_for = now
        job = config.new_job(
            payload,
            self.args,
            self.kwargs,
            now,
            scheduled_for=scheduled_for,
            id=id,
            queue=opts.queue,
            key=opts.key,
            priority=opts.priority,
            expires_at=_expires_at(opts.expires, now),
        )
        if opts.after:
            job.after = opts.after
        return job


def _expires_at(expires: float | datetime | None, now: float) -> float | None:
    if expires is None:
        return None
    if isinstance(expires, datetime):
        return expires.timestamp()
    return now + expires


def _expires(value: float | timedelta | datetime | None) -> float | datetime | None:
    if value is None or isinstance(value, datetime):
        return value
    return seconds(value, "expires")


class _Enqueuer(Generic[P, R]):
    """The enqueue methods shared by a Task and a Task bound to options."""

    task: Task[P, R]
    _options: EnqueueOptions

    def s(self, *args: P.args, **kwargs: P.kwargs) -> Signature:
        """A signature of this call, for ``app.enqueue_many``, ``app.group`` and ``app.chain``
        (where it takes the previous step's result as its first argument)."""
        return Signature(self.task, args, kwargs, self._options)

    def si(self, *args: Any, **kwargs: Any) -> Signature:
        """An immutable signature: in ``app.chain`` this step runs after the previous one but
        does not take its result (elsewhere it is ``s``)."""
        return Signature(self.task, args, kwargs, self._options, immutable=True)

    def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> Job[R]:
        """Store a job that runs this task with these arguments; returns its handle
        (``job.result()`` is what the task returns)."""
        sig = Signature(self.task, args, kwargs, self._options)
        return self.task.app.enqueue_many([sig])[0]

    async def enqueue_async(self, *args: P.args, **kwargs: P.kwargs) -> Job[R]:
        """Async twin of ``enqueue``."""
        sig = Signature(self.task, args, kwargs, self._options)
        return (await self.task.app.enqueue_many_async([sig]))[0]


class BoundTask(_Enqueuer[P, R]):
    """A task with per-call options set: ``task.options(delay=30).enqueue(...)``."""

    def __init__(self, task: Task[P, R], options: EnqueueOptions) -> None:
        self.task = task
        self._options = options

    def options(
        self,
        *,
        delay: float | timedelta | None = None,
        at: datetime | None = None,
        priority: int | None = None,
        key: str | None = None,
        queue: str | None = None,
        connection: Any = None,
        on_commit: bool | None = None,
        id: str | None = None,
        after: Sequence[Any] | None = None,
        expires: float | timedelta | datetime | None = None,
    ) -> BoundTask[P, R]:
        """Further options on top of these."""
        changes = _option_changes(
            delay, at, priority, key, queue, connection, on_commit, id, after, expires
        )
        return BoundTask(self.task, replace(self._options, **changes))


def _option_changes(
    delay: float | timedelta | None,
    at: datetime | None,
    priority: int | None,
    key: str | None,
    queue: str | None,
    connection: Any,
    on_commit: bool | None,
    id: str | None,
    after: Sequence[Any] | None = None,
    expires: float | timedelta | datetime | None = None,
) -> dict[str, Any]:
    changes: dict[str, Any] = {
        "after": None if after is None else after_ids(after),
        "delay": None if delay is None else seconds(delay, "delay"),
        "at": at,
        "priority": priority,
        "key": key,
        "queue": queue,
        "connection": connection,
        "on_commit": on_commit,
        "id": id,
        "expires": _expires(expires),
    }
    return {name: value for name, value in changes.items() if value is not None}


class Task(_Enqueuer[P, R]):
    """A registered task. Call it to run the function here; ``enqueue`` it to run it in a worker.

    ``R`` is what the function returns (awaited, for an ``async def``).
    """

    def __init__(self, app: AppPort, fn: Callable[P, Any], config: TaskConfig) -> None:
        self.app = app
        self.fn = fn
        self.config = config
        #: True for ``async def`` tasks (run on the event loop, not a thread).
        self.is_async = inspect.iscoroutinefunction(fn)
        #: How calls bind and how arguments and results cross JSON (from the signature).
        self.spec = CallSpec(fn, config.name)
        self.task = self
        self._options = EnqueueOptions()
        self.__doc__ = fn.__doc__
        self.__name__ = getattr(fn, "__name__", config.name)
        self.__wrapped__ = fn

    @property
    def name(self) -> str:
        """The name workers look the task up by."""
        return self.config.name

    def __repr__(self) -> str:
        return f"<Task {self.name} queue={self.config.queue}>"

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> Any:
        """Run the function directly, in this process (no job). Typed ``Any``: for an async
        task this is a coroutine, and ``R`` is what it resolves to (what a job's result is)."""
        return self.fn(*args, **kwargs)

    def success_outcome(
        self, record: JobRecord, value: Any, now: float, expire_at: float
    ) -> Outcome:
        """The outcome of a run of ``record`` that returned ``value``: succeeded, storing it."""
        return Outcome(
            record.id, "succeeded", result=self.spec.encode_result(value), expire_at=expire_at
        )

    def decode_result(self, data: bytes) -> Any:
        """A stored result of this task, restored to its return annotation's type."""
        return self.spec.decode_result(data)

    def options(
        self,
        *,
        delay: float | timedelta | None = None,
        at: datetime | None = None,
        priority: int | None = None,
        key: str | None = None,
        queue: str | None = None,
        connection: Any = None,
        on_commit: bool | None = None,
        id: str | None = None,
        after: Sequence[Any] | None = None,
        expires: float | timedelta | datetime | None = None,
    ) -> BoundTask[P, R]:
        """Per-call options: ``delay`` (seconds or timedelta) or ``at`` (aware datetime),
        ``priority``, ``key`` (index jobs by an entity), ``queue``, ``connection`` (PostgreSQL:
        enqueue inside the caller's transaction), ``on_commit`` (enqueue once the caller's
        transaction commits: an App that knows its framework's transactions, see
        ``duly.contrib.django``), ``id`` (the job's own id: while a job with that id is
        retained, enqueue returns it, ``job.deduplicated``), ``after`` (jobs, groups or job
        ids: the job waits, ``scheduled``, until every one of them succeeded; see
        ``duly.backends.dependencies``), ``expires`` (seconds, a timedelta or an aware
        datetime: a job not started by then never runs, it ends ``cancelled`` with
        ``JobExpired``)."""
        changes = _option_changes(
            delay, at, priority, key, queue, connection, on_commit, id, after, expires
        )
        return BoundTask(self, EnqueueOptions(**changes))


def after_ids(after: Any) -> tuple[str, ...]:
    """The job ids of an ``after=`` list: a ``duly.Job`` (or a job id), a ``duly.Group`` or a
    ``duly.Workflow`` (all its jobs); TypeError for anything else."""
    if isinstance(after, str | bytes) or not isinstance(after, Sequence | set | frozenset):
        raise TypeError(f"after= takes a list of jobs, groups or job ids, got {after!r}")
    ids: list[str] = []
    for item in after:
        if isinstance(item, str):
            ids.append(item)
        elif isinstance(getattr(item, "jobs", None), list):
            ids.extend(after_ids(item.jobs))
        elif isinstance(getattr(item, "id", None), str):
            ids.append(item.id)
        else:
            raise TypeError(f"after= takes jobs, groups or job ids, got {item!r}")
    return tuple(dict.fromkeys(ids))


def build_all(signatures: Sequence[Signature], now: float) -> list[NewJob]:
    """Build every signature's job, validating all before any is stored (their ids made in
    one batch: ``new_ids``)."""
    ids = new_ids(len(signatures))
    return [sig.build(now, id) for sig, id in zip(signatures, ids, strict=True)]
