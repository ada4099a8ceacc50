"""duly: background jobs that are never lost, never overlap when they must not, fail loudly and
retryably, and can be looked up from queue to result.

    import duly
    app = duly.App()                       # $DULY_URL, else sqlite:///duly.db

    @app.task(retries=3, timeout=60)
    def add(a: int, b: int) -> int:
        return a + b

    job = add.enqueue(1, 2)
    app.get_job(job.id).status             # "queued" ... "succeeded"

Run the jobs with ``duly worker module:app``.
"""

from typing import TYPE_CHECKING

from duly._app import App, FailureCallback
from duly._clock import Clock, ManualClock, SystemClock
from duly._context import JobContext, RunContext, current_job
from duly._errors import (
    ArgumentsMismatch,
    BackendUnavailable,
    ConfigurationError,
    DependencyFailed,
    DulyError,
    DurabilityError,
    EventsTrimmed,
    Interrupted,
    JobCancelled,
    JobExpired,
    JobFailed,
    JobNotFound,
    JobProcessDied,
    JobTimeout,
    PayloadError,
    PayloadTooLarge,
    Retry,
    SerializationError,
    StorageTooNew,
    TaskNotFound,
    Throttled,
)
from duly._events import Event
from duly._freshness import Freshness, Mirror, fingerprint
from duly._groups import Group, GroupInfo
from duly._hooks import Hook
from duly._job import Job, JobInfo
from duly._progress import Progress
from duly._records import (
    STATUSES,
    EnqueueResult,
    JobRecord,
    JobStatus,
    NewJob,
    Outcome,
    QueueStats,
    StatRow,
    WorkerRecord,
)
from duly._registry import TaskSettings
from duly._retry import Backoff
from duly._schedules import ScheduleInfo
from duly._task import Signature, Task
from duly._transactions import Transactions
from duly._webhooks import Webhook
from duly._worker import Worker
from duly._workflows import Workflow, WorkflowInfo
from duly.backends import Backend, backend_from_url

__version__: str  # set on first use (below): a checker sees a str, and no other attribute

if not TYPE_CHECKING:

    def __getattr__(name: str) -> str:
        """``duly.__version__``, read from the installed metadata on first use: importing
        ``importlib.metadata`` costs a worker's start-up ~20 ms it otherwise never needs."""
        if name == "__version__":
            from importlib.metadata import PackageNotFoundError, version

            try:
                found = version("duly")
            except PackageNotFoundError:  # pragma: no cover - running from a source tree
                found = "0.0.0"
            globals()["__version__"] = found
            return found
        raise AttributeError(f"module 'duly' has no attribute {name!r}")


__all__ = [
    "STATUSES",
    "App",
    "ArgumentsMismatch",
    "Backend",
    "BackendUnavailable",
    "Backoff",
    "Clock",
    "ConfigurationError",
    "DependencyFailed",
    "DulyError",
    "DurabilityError",
    "EnqueueResult",
    "Event",
    "EventsTrimmed",
    "FailureCallback",
    "Freshness",
    "Group",
    "GroupInfo",
    "Hook",
    "Interrupted",
    "Job",
    "JobCancelled",
    "JobContext",
    "JobExpired",
    "JobFailed",
    "JobInfo",
    "JobNotFound",
    "JobProcessDied",
    "JobRecord",
    "JobStatus",
    "JobTimeout",
    "ManualClock",
    "Mirror",
    "NewJob",
    "Outcome",
    "PayloadError",
    "PayloadTooLarge",
    "Progress",
    "QueueStats",
    "Retry",
    "RunContext",
    "ScheduleInfo",
    "SerializationError",
    "Signature",
    "StatRow",
    "StorageTooNew",
    "SystemClock",
    "Task",
    "TaskNotFound",
    "TaskSettings",
    "Throttled",
    "Transactions",
    "Webhook",
    "Worker",
    "WorkerRecord",
    "Workflow",
    "WorkflowInfo",
    "__version__",
    "backend_from_url",
    "current_job",
    "fingerprint",
]
