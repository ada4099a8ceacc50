"""What a worker runs of a claim's records (``_worker.expiry.runnable``): only the jobs the
claim started, whatever else comes back."""

from __future__ import annotations

import asyncio
from pathlib import Path

import duly
from duly._records import JobRecord
from duly._worker.expiry import runnable


def record(job_id: str, status: str) -> JobRecord:
    return JobRecord(
        id=job_id,
        task="tests.tasks.add",
        queue="default",
        payload=b"{}",
        status=status,
        attempts=1 if status == "running" else 0,
        max_attempts=3,
        key=None,
        priority=0,
        enqueued_at=1.0,
        scheduled_for=1.0,
    )


def test_only_the_running_records_of_a_claim_are_run(tmp_path: Path) -> None:
    app = duly.App(f"sqlite:///{tmp_path / 'never-opened.db'}")
    seen: list[str] = []

    class Watch(duly.Hook):
        def expired(self, record: JobRecord) -> None:
            seen.append(record.id)

    app.hooks.add(Watch())
    # An expired job another client retried before the claimer looked: queued, not this
    # worker's; it comes last, after one that the claim did end.
    records = [record("a", "running"), record("b", "cancelled"), record("c", "queued")]
    assert [r.id for r in asyncio.run(runnable(app, records))] == ["a"]
    assert seen == ["b"]
