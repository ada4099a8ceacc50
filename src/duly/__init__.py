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

from importlib.metadata import PackageNotFoundError, version

from duly.app import App, FailureCallback
from duly.clock import Clock, ManualClock, SystemClock
from duly.context import JobContext, current_job
from duly.errors import (
    ArgumentsMismatch,
    BackendUnavailable,
    ConfigurationError,
    DulyError,
    DurabilityError,
    EventsTrimmed,
    JobCancelled,
    JobNotFound,
    JobTimeout,
    PayloadError,
    PayloadTooLarge,
    Retry,
    SerializationError,
    StorageTooNew,
    TaskNotFound,
    Throttled,
)
from duly.events import Event
from duly.freshness import Freshness, Mirror, fingerprint
from duly.groups import Group, GroupInfo
from duly.hooks import Hook
from duly.job import Job, JobInfo
from duly.records import STATUSES, JobStatus, QueueStats, StatRow, WorkerRecord
from duly.registry import TaskSettings
from duly.retry import Backoff
from duly.task import Signature, Task
from duly.webhooks import Webhook
from duly.worker import Worker

try:
    __version__ = version("duly")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0"

__all__ = [
    "STATUSES",
    "App",
    "ArgumentsMismatch",
    "BackendUnavailable",
    "Backoff",
    "Clock",
    "ConfigurationError",
    "DulyError",
    "DurabilityError",
    "Event",
    "EventsTrimmed",
    "FailureCallback",
    "Freshness",
    "Group",
    "GroupInfo",
    "Hook",
    "Job",
    "JobCancelled",
    "JobContext",
    "JobInfo",
    "JobNotFound",
    "JobStatus",
    "JobTimeout",
    "ManualClock",
    "Mirror",
    "PayloadError",
    "PayloadTooLarge",
    "QueueStats",
    "Retry",
    "SerializationError",
    "Signature",
    "StatRow",
    "StorageTooNew",
    "SystemClock",
    "Task",
    "TaskNotFound",
    "TaskSettings",
    "Throttled",
    "Webhook",
    "Worker",
    "WorkerRecord",
    "__version__",
    "current_job",
    "fingerprint",
]
