"""Helpers for users' own tests and scripts: run the jobs of an App in this process.

app = duly.App(f"sqlite:///{tmp_path}/jobs.db")
job = send_mail.enqueue("a@b.c")
duly.testing.run_jobs(app, [job])        # runs a worker until that job finished
assert app.get_job(job.id).status == "succeeded"
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from typing import Any

from duly._app import App
from duly._errors import JobNotFound
from duly._job import Job
from duly._worker import Worker, WorkerStats
from duly.backends import redact_url

__all__ = ["run_jobs", "run_jobs_async"]


async def run_jobs_async(
    app: App,
    jobs: Iterable[Job | str] | None = None,
    *,
    timeout: float = 30.0,
    **worker_options: Any,
) -> WorkerStats:
    """Run a worker until every job in ``jobs`` has finished (retries and delays included),
    or, with ``jobs=None``, until nothing is queued, due or running (``burst``).

    Raises ``duly.JobNotFound`` (naming the id and the backend) before running anything if a
    job is not stored in this App's backend, and TimeoutError after ``timeout`` seconds.
    Returns the worker's counters.
    """
    worker_options.setdefault("install_signal_handlers", False)
    ids = None if jobs is None else [j.id if isinstance(j, Job) else j for j in jobs]
    for job_id in ids or ():
        # Checked before running anything: a job of another App or backend would never finish
        # here (and one that finishes and is purged later must not count as missing).
        if await app.get_job_async(job_id) is None:
            raise JobNotFound(f"job {job_id!r} not found in {_where(app)}")
    worker = Worker(app, burst=ids is None, **worker_options)
    runner = asyncio.create_task(worker.run())
    deadline = time.monotonic() + timeout
    try:
        while not runner.done():
            if ids is not None and await _all_finished(app, ids):
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"jobs not finished after {timeout}s")
            await asyncio.wait({runner}, timeout=0.05)
    finally:
        worker.stop()
        await runner
    return worker.stats


async def _all_finished(app: App, ids: list[str]) -> bool:
    for job_id in ids:
        info = await app.get_job_async(job_id)
        if info is not None and not info.finished:  # None: finished and purged since
            return False
    return True


def _where(app: App) -> str:
    """The App's backend URL without a password, and its namespace."""
    return f"{redact_url(app.url)} (namespace {app.namespace!r})"


def run_jobs(
    app: App,
    jobs: Iterable[Job | str] | None = None,
    *,
    timeout: float = 30.0,
    **worker_options: Any,
) -> WorkerStats:
    """Sync twin of ``run_jobs_async`` (runs its own event loop; not inside a running one)."""

    async def main() -> WorkerStats:
        try:
            return await run_jobs_async(app, jobs, timeout=timeout, **worker_options)
        finally:
            await app.aclose()

    return asyncio.run(main())
