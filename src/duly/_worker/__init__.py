"""The worker: runs jobs, keeps leases, recovers the jobs of dead workers."""

from duly._worker.worker import Worker, WorkerStats

__all__ = ["Worker", "WorkerStats"]
