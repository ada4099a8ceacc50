"""What a run leaves behind for people (PRODUCT §3, §10): stored tracebacks that start at the
task's code, and ``duly.testing.run_jobs`` refusing jobs it cannot find."""

from __future__ import annotations

import time

import pytest

import duly
import duly.testing

pytestmark = pytest.mark.timeout(60)


def _first_frame(traceback_text: str) -> str:
    """The first ``File ...`` line of the last exception of a formatted traceback (the one
    raised; chained causes come first)."""
    last = traceback_text.split("Traceback (most recent call last):")[-1]
    return next(line for line in last.splitlines() if line.lstrip().startswith("File"))


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_stored_traceback_starts_at_the_task(app: duly.App, run_burst, is_async: bool) -> None:
    def inner() -> None:
        try:
            raise KeyError("cause")
        except KeyError as exc:
            raise ValueError("broken") from exc

    if is_async:

        @app.task(name="t.broken", retries=0)
        async def broken() -> None:
            inner()

    else:

        @app.task(name="t.broken", retries=0)
        def broken() -> None:
            inner()

    job = broken.enqueue()
    run_burst(app)
    info = app.get_job(job.id)
    assert info is not None and info.error is not None
    text = info.error["traceback"]
    first = _first_frame(text)
    assert __file__ in first and "in broken" in first, text
    assert "duly/worker" not in text.split("The above exception")[-1], text
    # The chained exception is kept whole.
    assert "KeyError: 'cause'" in text and "ValueError: broken" in text


def test_traceback_of_a_worker_error_is_kept(app: duly.App, run_burst) -> None:
    """An error the worker itself raised (a sync job's timeout) keeps the worker's frames:
    there is no task frame to start at."""

    @app.task(name="t.stuck", retries=0, timeout=0.2)
    def stuck() -> None:
        time.sleep(2)

    job = stuck.enqueue()
    run_burst(app)
    info = app.get_job(job.id)
    assert info is not None and info.error is not None
    assert info.error["type"] == "JobTimeout"
    assert "threads.py" in info.error["traceback"]


def test_run_jobs_refuses_a_job_it_cannot_find(app: duly.App, make_app, tmp_path) -> None:
    @app.task(name="t.ok")
    def ok() -> int:
        return 1

    job = ok.enqueue()
    elsewhere = duly.App(f"sqlite:///{tmp_path / 'other.db'}")
    with pytest.raises(duly.JobNotFound) as caught:
        duly.testing.run_jobs(elsewhere, [job], timeout=10)
    assert isinstance(caught.value, duly.DulyError) and job.id in str(caught.value)
    assert "other.db" in str(caught.value)
    with pytest.raises(duly.JobNotFound, match="01NOTAJOB"):
        duly.testing.run_jobs(app, [job, "01NOTAJOB"], timeout=10)
    assert app.get_job(job.id).status == "queued", "nothing ran before the check"
    duly.testing.run_jobs(app, [job], timeout=20)
    assert app.get_job(job.id).status == "succeeded"
